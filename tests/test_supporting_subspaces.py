"""Token subspaces (appendix V): the learning, its batching, the SVD and the stage checks."""

import numpy as np
import pytest
import torch

from tinylens.model import ModelConfig, Transformer
from tinylens.supporting.inputs import load_subspaces, save_subspaces
from tinylens.supporting.schemas import check_config
from tinylens.supporting.subspaces import (
    analyse_stage,
    learn_token_vectors,
    mixture_distributions,
    mixture_pairs,
    self_probability,
    token_subspaces,
)

VOCAB, D = 7, 12


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = Transformer(ModelConfig(vocab_size=VOCAB, block_size=8, d_model=D, n_layer=2, n_head=2, dropout=0.0))
    with torch.no_grad():  # an unembedding strong enough for confident predictions
        m.lm_head.weight.mul_(300.0)
        for block in m.blocks:
            for p in block.parameters():
                if p.dim() > 1:
                    p.mul_(10.0)
    return m.eval()


def test_learned_vectors_reach_the_target(model):
    target = 1e-4
    for stage in (2, 1):
        learned = learn_token_vectors(model, stage, [0, 3, 5], samples=4, lr=0.1, weight_decay=0.01,
                                      target_nll=target, max_steps=400, seed=1)
        assert (learned.stopped_step > 0).all(), (stage, learned.stopped_step, learned.joint_nll)
        assert (learned.joint_nll < target).all()
        assert learned.samples.shape == (3, 4, D)


def test_a_token_out_of_budget_is_reported_as_not_reached(model):
    learned = learn_token_vectors(model, 2, [0, 1], samples=3, lr=1e-4, weight_decay=0.0, target_nll=1e-4,
                                  max_steps=3, seed=0)
    assert learned.stopped_step.tolist() == [-1, -1]
    assert (learned.joint_nll > 1e-4).all()


def test_a_token_whose_loss_stops_falling_stops_on_the_plateau_rule(model):
    """lr 0 never moves the vectors: the joint NLL is flat, so every token stops at the first step the
    window allows, converged though short of the target; with the rule off they run the whole budget."""
    kwargs = dict(samples=3, lr=0.0, weight_decay=0.0, target_nll=1e-9, max_steps=30, seed=0)
    flat = learn_token_vectors(model, 2, [0, 1], plateau_window=5, plateau_min_drop=1e-3, **kwargs)
    assert flat.plateau_step.tolist() == [5, 5] and flat.stopped_step.tolist() == [-1, -1]
    off = learn_token_vectors(model, 2, [0, 1], **kwargs)
    assert off.plateau_step.tolist() == [-1, -1]
    # learning that still improves by more than the tolerance over the window is not stopped by it
    moving = learn_token_vectors(model, 2, [0, 1], samples=3, lr=0.1, weight_decay=0.0, target_nll=1e-9,
                                 max_steps=10, seed=0, plateau_window=3, plateau_min_drop=1e-6)
    assert moving.plateau_step.tolist() == [-1, -1]


def test_the_plateau_rule_is_a_drop_in_nats_not_a_share_of_the_nll(model):
    """A token stops at the first step whose joint NLL lies less than min_drop nats below its value a
    window before (read off the same learning with the rule off), also where that drop is a large share
    of a small NLL: a relative tolerance would keep an NLL heading for 0 learning for ever."""
    kwargs = dict(samples=3, lr=0.01, weight_decay=0.0, target_nll=1e-12, max_steps=60, seed=0)
    free = learn_token_vectors(model, 2, [0, 1, 2], **kwargs).history
    window, min_drop = 5, 1e-3
    ruled = learn_token_vectors(model, 2, [0, 1, 2], plateau_window=window, plateau_min_drop=min_drop, **kwargs)
    drop = free[:, :-window] - free[:, window:]  # [token step - window]: the drop at step s + window
    for t in range(3):
        first = np.flatnonzero(drop[t] < min_drop)
        assert ruled.plateau_step[t] == (first[0] + window if len(first) else -1), (t, ruled.plateau_step)
    stopped = ruled.plateau_step[0]
    assert stopped > 0 and drop[0, stopped - window] / free[0, stopped - window] > 0.01
    assert np.isnan(ruled.history[0, stopped + 1 :]).all() and not np.isnan(ruled.history[0, : stopped + 1]).any()


def test_learning_tokens_in_one_batch_is_learning_each_alone(model):
    """Same init, same AdamW: the batch (which drops tokens as they finish, with their optimiser
    state) gives each token the vectors it gets when learned on its own."""
    init = torch.randn(3, 5, D, generator=torch.Generator().manual_seed(7))
    kwargs = dict(samples=5, lr=0.05, weight_decay=0.01, target_nll=1e-3, max_steps=150)
    together = learn_token_vectors(model, 2, [2, 4, 6], init=init, **kwargs)
    assert len(set(together.stopped_step.tolist())) > 1, "tokens should finish at different steps"
    for i, token in enumerate([2, 4, 6]):
        alone = learn_token_vectors(model, 2, [token], init=init[i : i + 1], **kwargs)
        assert alone.stopped_step[0] == together.stopped_step[i]
        torch.testing.assert_close(alone.samples[0], together.samples[i], rtol=1e-4, atol=1e-5)


def test_the_model_is_left_as_it_was(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learn_token_vectors(model, 0, [1], samples=2, lr=0.1, weight_decay=0.01, target_nll=1e-4, max_steps=5)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.requires_grad for p in model.parameters())


def test_copies_of_one_vector_have_a_zero_second_singular_value():
    v = np.random.default_rng(0).normal(size=D)
    sub = token_subspaces(np.stack([np.tile(v, (6, 1)), np.tile(-2 * v, (6, 1))]))
    assert np.all(sub.singular[:, 1] < 1e-12 * sub.singular[:, 0])
    assert sub.sigma_ratio.min() > 1e12  # or infinite when sigma_2 is exactly 0
    # sign aligned to the samples: +v for the first token, -v for the second
    np.testing.assert_allclose(sub.direction[0], v / np.linalg.norm(v), atol=1e-12)
    np.testing.assert_allclose(sub.direction[1], -v / np.linalg.norm(v), atol=1e-12)
    np.testing.assert_allclose(sub.median_norm, [np.linalg.norm(v), 2 * np.linalg.norm(v)])
    assert np.all(sub.singular_centred < 1e-9)  # identical samples: nothing left after centring
    assert sub.negative_share.tolist() == [0.0, 0.0]


def test_known_singular_values_and_the_majority_sign():
    e = np.eye(4)
    # 3 samples along +e0 (norm 3), 1 sample along -e0 (norm 3), 1 along e1 (norm 1)
    samples = np.array([[3 * e[0], 3 * e[0], 3 * e[0], -3 * e[0], e[1]]])
    sub = token_subspaces(samples)
    np.testing.assert_allclose(sub.singular[0, :2], [6.0, 1.0], atol=1e-12)  # sqrt(4 * 9), 1
    assert sub.sigma_ratio[0] == pytest.approx(6.0)
    np.testing.assert_allclose(sub.direction[0], e[0], atol=1e-12)  # 3 of 5 samples point along +e0
    assert sub.negative_share[0] == pytest.approx(1 / 5)


def test_the_direction_alone_and_two_token_mixtures(model):
    learned = learn_token_vectors(model, 2, list(range(VOCAB)), samples=4, lr=0.1, weight_decay=0.01,
                                  target_nll=1e-4, max_steps=300, seed=2)
    sub = token_subspaces(learned.samples)
    p_self = self_probability(model, 2, list(range(VOCAB)), sub)
    assert p_self.shape == (VOCAB,) and np.median(p_self) > 0.9
    mix = mixture_distributions(model, 2, sub, [(0, 3), (3, 3)])
    assert mix.shape == (2, VOCAB)
    np.testing.assert_allclose(mix.sum(1), 1.0, atol=1e-9)
    # at the input of ln_f only the direction counts: v_3 + v_3 is v_3
    np.testing.assert_allclose(mix[1, 3], p_self[3], atol=1e-5)


def test_subspace_files_round_trip_and_refuse_another_shape(tmp_path):
    sub = token_subspaces(np.random.default_rng(1).normal(size=(VOCAB, 5, D)))
    tensors = {"samples": np.zeros((VOCAB, 5, D)), "direction": sub.direction, "median_norm": sub.median_norm,
               "singular": sub.singular, "singular_centred": sub.singular_centred, "converged": np.ones(VOCAB)}
    save_subspaces(tmp_path / "s.safetensors", 2, "abcdefg", tensors)
    stage, loaded = load_subspaces(tmp_path / "s.safetensors", VOCAB, D)
    assert stage == 2
    np.testing.assert_allclose(loaded["direction"], sub.direction, atol=1e-6)
    with pytest.raises(ValueError, match="expected"):
        load_subspaces(tmp_path / "s.safetensors", VOCAB, D + 1)
    (tmp_path / "bad.safetensors").write_bytes(b"not a file")
    with pytest.raises(ValueError, match="truncated"):
        load_subspaces(tmp_path / "bad.safetensors", VOCAB, D)


def test_stage_configuration_is_checked():
    preset = {"model": {"n_layer": 6, "block_size": 16}}

    def problems(stages, lengths=(5, 15)):
        return check_config(preset, {"supporting": {"subspace_stages": stages, "robustness": {"lengths": lengths}}},
                            "presets.p")

    assert problems([3, 6, 5]) == []
    assert problems([7, 6]) == ["config key 'supporting.subspace_stages' is [7, 6]: every stage must lie in 0..6 (the "
                                "input of block s, 0-based; 6 = the input of ln_f, 'presets.p.model.n_layer') and 6 "
                                "must be among them"]
    assert "6 must be among them" in problems([5, 4])[0]
    assert problems([6], [5, 16, 17, 20]) == ["config key 'supporting.robustness.lengths' has [17, 20], longer than the "
                                              "context ('presets.p.model.block_size' = 16); use lengths of at most 16"]


def test_a_stage_of_every_token_is_its_parts(model):
    """analyse_stage (the rule's one call per stage) gives what the parts give, one row per token."""
    vocab = "abcdefg"[:VOCAB]
    pairs = mixture_pairs(["ab", "gc"], vocab, "tokenizer.json")
    assert pairs == [(0, 1), (6, 2)]
    options = dict(lr=0.1, weight_decay=0.01, target_nll=1e-3, max_steps=60, seed=2)
    result = analyse_stage(model, 2, vocab, pairs, 4, **options)
    learned = learn_token_vectors(model, 2, list(range(VOCAB)), 4, **options)
    sub = token_subspaces(learned.samples)
    assert torch.equal(result.tensors["samples"], learned.samples)
    assert np.array_equal(result.columns["stopped_step"], learned.stopped_step)
    assert np.array_equal(result.columns["converged"], (learned.stopped_step >= 0) | (learned.plateau_step >= 0))
    assert np.array_equal(result.tensors["converged"] > 0.5, result.columns["converged"])
    assert np.array_equal(result.columns["samples_reached"], (learned.sample_nll < 1e-3).sum(1))
    assert np.allclose(result.columns["sigma_ratio"], sub.sigma_ratio)
    assert np.allclose(result.columns["self_probability"], self_probability(model, 2, list(range(VOCAB)), sub))
    assert np.allclose(result.mixtures, mixture_distributions(model, 2, sub, pairs))
    assert result.columns["token"] == list(vocab) and result.mixtures.shape == (2, VOCAB)
    with pytest.raises(ValueError, match=r"'supporting.mixture_pairs'.*\['z'\].*tokenizer.json"):
        mixture_pairs(["az"], vocab, "tokenizer.json")
