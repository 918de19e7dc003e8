"""Training dynamics (method.md §8): known values of every quantity on hand-built cases."""

import math

import numpy as np
import pytest
import torch

from tinylens import measures
from tinylens.dynamics.energy import interaction_energies, interaction_energy, prefix_interaction_energy
from tinylens.dynamics.heads import (
    attended_tokens,
    copying_score_eigen,
    copying_score_logits,
    detection_score,
    duplicate_token_pattern,
    prefix_matching_pattern,
    prefix_matching_score,
    previous_token_pattern,
)
from tinylens.dynamics.measure import _validation_measures, measure_checkpoint, unigram_direction
from tinylens.dynamics.phases import (
    critical_points,
    ie_kl_phases,
    log_position_derivative,
    loss_bump,
    phase_change_window,
    smooth,
    zigzag,
)
from tinylens.dynamics.probes import MeasureSettings, make_probes, repeat_candidates, repeated_sequences, windows
from tinylens.dynamics.summary import uniform_prefix_matching
from tinylens.model import ModelConfig, Transformer

E = math.e


def measure_settings(val_windows=10, train_windows=4, repeat_length=4, sequences=3, exclude=1, seed=0):
    """Probes of 16-token windows, repeats of 4 x 4 tokens; ICL at positions 2 and 15."""
    return MeasureSettings(val_windows=val_windows, train_windows=train_windows, energy_windows=10,
                           icl_positions=[2, 15], icl_bands=[[1, 3], [10, 14]],
                           repeat={"length": repeat_length, "copies": 4, "sequences": sequences, "exclude": exclude},
                           unigram_direction={"restarts": 2, "steps": 20}, seed=seed)


# --- interaction energy ---------------------------------------------------------------------------

def test_energy_of_identical_vectors_is_e():
    states = torch.tensor([1.0, -2.0, 0.5]).repeat(7, 1)
    assert float(interaction_energy(states)) == pytest.approx(E, abs=1e-12)
    assert float(prefix_interaction_energy(states)) == pytest.approx(E, abs=1e-12)


@pytest.mark.parametrize("n", [2, 5, 16])
def test_energy_of_orthonormal_vectors(n):
    states = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(n), dtype=torch.float64))[0][:n]
    assert float(interaction_energy(states)) == pytest.approx((E + n - 1) / n, abs=1e-10)
    # every prefix of t orthonormal states has (e + t - 1)/t; the check averages t = 2..n
    expected = np.mean([(E + t - 1) / t for t in range(2, n + 1)])
    assert float(prefix_interaction_energy(states)) == pytest.approx(expected, abs=1e-10)


def test_energy_ignores_positive_rescaling_and_is_batched():
    g = torch.Generator().manual_seed(0)
    states = torch.randn(3, 4, 9, 8, generator=g, dtype=torch.float64)  # [depth batch n d]
    scales = torch.rand(3, 4, 9, 1, generator=g, dtype=torch.float64) * 100 + 0.01
    whole, prefix = interaction_energies(states)
    assert whole.shape == prefix.shape == (3, 4)
    torch.testing.assert_close(interaction_energy(states * scales), whole, rtol=1e-12, atol=0)
    torch.testing.assert_close(prefix_interaction_energy(states * scales), prefix, rtol=1e-12, atol=0)
    # the definition, term by term, for one sequence
    x = states[1, 2]
    brute = np.mean([[math.exp(float(measures.cosine(x[i], x[j]))) for j in range(9)] for i in range(9)])
    assert float(whole[1, 2]) == pytest.approx(brute, rel=1e-12)
    brute_prefix = np.mean([np.mean([[math.exp(float(measures.cosine(x[i], x[j]))) for j in range(t)]
                                     for i in range(t)]) for t in range(2, 10)])
    assert float(prefix[1, 2]) == pytest.approx(brute_prefix, rel=1e-12)
    # a negative factor flips a state, which changes the energy
    flipped = states.clone()
    flipped[1, 2, 0] *= -1
    assert float(interaction_energy(flipped)[1, 2]) != pytest.approx(float(whole[1, 2]), rel=1e-6)


# --- head scores ------------------------------------------------------------------------------------

TOKENS = torch.tensor([[0, 1, 2, 0, 1, 2]])


def test_detection_patterns_by_hand():
    assert previous_token_pattern(4).tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    dup = duplicate_token_pattern(torch.tensor([[5, 6, 5, 5]]))[0]
    assert dup.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 1, 0]]
    pm = prefix_matching_pattern(torch.tensor([[5, 6, 5, 5]]))[0]
    # query 2 (token 5): earlier 5 at j=0 -> key 1; query 3: 5 at j=0 and j=2 -> keys 1 and 3
    assert pm.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 0, 1]]


def test_prefix_matching_score_of_hand_built_patterns():
    pos = 6
    induction = torch.zeros(1, 1, pos, pos)
    for i in range(pos):
        induction[0, 0, i, max(i - 2, 0) if i >= 3 else 0] = 1.0  # query i -> key i - 3 + 1
    assert float(prefix_matching_score(induction, TOKENS, 3)[0]) == pytest.approx(1.0)
    uniform = (torch.tril(torch.ones(pos, pos)) / torch.arange(1, pos + 1)[:, None])[None, None]
    # queries 3, 4, 5 of repeat 2 each have one target among 4, 5, 6 visible keys
    assert float(prefix_matching_score(uniform, TOKENS, 3)[0]) == pytest.approx((1 / 4 + 1 / 5 + 1 / 6) / 3)
    assert uniform_prefix_matching(3, 2) == pytest.approx((1 / 4 + 1 / 5 + 1 / 6) / 3)
    previous = torch.zeros(1, 1, pos, pos)
    previous[0, 0, 0, 0] = 1
    for i in range(1, pos):
        previous[0, 0, i, i - 1] = 1
    assert float(prefix_matching_score(previous, TOKENS, 3)[0]) == 0.0
    # TransformerLens "mul": sum(A * D) / sum(A) over all rows: row 0 has no previous token
    assert float(detection_score(previous, previous_token_pattern(pos))[0]) == pytest.approx(5 / 6)
    two_heads = torch.cat([induction, uniform], dim=1)
    torch.testing.assert_close(prefix_matching_score(two_heads, TOKENS, 3).float(),
                               torch.tensor([1.0, (1 / 4 + 1 / 5 + 1 / 6) / 3]))


def test_copying_eigen_score_of_identity_and_negation():
    d = 5
    eye = torch.eye(d)
    W_V, W_O = eye[None], eye[None]
    assert float(copying_score_eigen(eye, W_V, W_O, eye)[0]) == pytest.approx(1.0)
    assert float(copying_score_eigen(eye, W_V, -W_O, eye)[0]) == pytest.approx(-1.0)
    # a rotation by 90 degrees in a plane: eigenvalues +-i, no copying
    rot = torch.eye(2)[[1, 0]] * torch.tensor([[1.0], [-1.0]])
    assert float(copying_score_eigen(torch.eye(2), rot[None], torch.eye(2)[None], torch.eye(2))[0]) == pytest.approx(0.0, abs=1e-12)


def test_copying_eigen_score_equals_the_full_vocab_circuit():
    g = torch.Generator().manual_seed(3)
    V, d, h, dh = 11, 8, 3, 2
    W_E, W_U = torch.randn(V, d, generator=g).double(), torch.randn(d, V, generator=g).double()
    W_V, W_O = torch.randn(h, d, dh, generator=g).double(), torch.randn(h, dh, d, generator=g).double()
    scores = copying_score_eigen(W_E, W_V, W_O, W_U)
    for k in range(h):
        eig = torch.linalg.eigvals(W_E @ W_V[k] @ W_O[k] @ W_U)
        assert float(scores[k]) == pytest.approx(float(eig.real.sum() / eig.abs().sum()), abs=1e-9)


def test_copying_logit_score_by_hand():
    logits = torch.zeros(1, 2, 1, 4)
    logits[0, 0, 0, 2] = 3.0  # head 0 raises only token 2, the one it attends to
    logits[0, 1, 0, 1] = 3.0  # head 1 raises only token 1, not the one it attends to
    attended = torch.tensor([[[2], [2]]])
    torch.testing.assert_close(copying_score_logits(logits, attended), torch.tensor([1.0, -1.0]))
    half = torch.tensor([[[[0.0, 2.0, 2.0, 0.0]]]])  # equal boosts of 1 on two tokens -> share 1/2
    assert float(copying_score_logits(half, torch.tensor([[[2]]]))[0]) == pytest.approx(0.0)
    shifted = torch.tensor([[[[5.0, 5.0, 6.0, 5.0]]]])  # a constant shift of all logits is no boost
    assert float(copying_score_logits(shifted, torch.tensor([[[2]]]))[0]) == pytest.approx(1.0)
    pattern = torch.tensor([[[[0.1, 0.7, 0.2]]]])
    assert attended_tokens(pattern, torch.tensor([[4, 9, 6]])).tolist() == [[[9]]]


# --- probes -----------------------------------------------------------------------------------------

def test_probes_are_fixed_and_well_formed():
    ids = np.random.default_rng(0).integers(0, 20, 5000).astype(np.uint8)
    ids[ids == 19] = 0  # token 19 never occurs
    settings = measure_settings(val_windows=8, train_windows=4, repeat_length=4, sequences=6, exclude=2, seed=1)
    a = make_probes(ids, ids[:1000], 20, 16, settings)
    b = make_probes(ids, ids[:1000], 20, 16, settings)
    assert np.array_equal(a.val, b.val) and np.array_equal(a.repeated, b.repeated)
    assert a.val.shape == (8, 17) and a.train.shape == (4, 17) and a.repeated.shape == (6, 16)
    assert np.array_equal(a.repeated[:, :4], a.repeated[:, 4:8])
    assert all(len(set(row[:4])) == 4 for row in a.repeated)
    counts = np.bincount(ids, minlength=20)
    kept = repeat_candidates(counts, 2)
    order = np.argsort(-counts)
    assert set(order[:2]).isdisjoint(kept) and 19 not in kept and len(kept) == 19 - 4
    assert a.unigram.sum() == pytest.approx(1.0) and a.unigram[19] > 0  # the pseudocount
    w = windows(np.arange(100), 3, 10, seed=0)
    assert all(np.array_equal(row, np.arange(row[0], row[0] + 10)) for row in w)
    with pytest.raises(ValueError, match="needs at least 30 candidate tokens"):
        repeated_sequences(kept, 2, 30, 2, 0)


# --- one checkpoint ---------------------------------------------------------------------------------

def unigram_model(unigram: np.ndarray) -> Transformer:
    """A model whose every prediction is the unigram: lm_head ignores the stream, its bias is log u."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=len(unigram), block_size=16, d_model=16, n_layer=2, n_head=2,
                                    dropout=0.0)).eval()
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.bias.copy_(torch.log(torch.as_tensor(unigram)))
    return model


def test_a_model_predicting_the_unigram_has_zero_kl_to_it():
    ids = np.random.default_rng(1).integers(0, 12, 4000)
    settings = measure_settings()
    probes = make_probes(ids, ids[:800], 12, 16, settings)
    model = unigram_model(probes.unigram)
    val = _validation_measures(model, probes, 10, torch.device("cpu"))
    assert float(val["kl_model_unigram"]) == pytest.approx(0.0, abs=1e-6)
    assert float(val["kl_unigram_model"]) == pytest.approx(0.0, abs=1e-6)
    row, heads = measure_checkpoint(model, probes, settings)
    assert row["unigram_direction_kl"] == pytest.approx(0.0, abs=1e-6)
    targets = probes.val[:, 1:]
    assert row["val_loss"] == pytest.approx(float(-np.log(probes.unigram[targets]).mean()), rel=1e-5)
    # a unigram model predicts no better late than early: its per-position loss is the targets' surprisal
    assert row["icl_score"] == pytest.approx(float(-np.log(probes.unigram[targets[:, 15]]).mean()
                                                  + np.log(probes.unigram[targets[:, 2]]).mean()), abs=1e-5)
    surprisal = -np.log(probes.unigram[targets])  # the band score: late band 10-14 minus early band 1-3
    assert row["icl_band"] == pytest.approx(float((surprisal[:, 10:15].mean(1) - surprisal[:, 1:4].mean(1)).mean()),
                                            abs=1e-5)
    assert 0 < row["icl_band_se"] < row["icl_score_se"] * 1.5
    assert set(heads) == {"prefix_matching", "copying_eigen", "copying_logit", "previous_token", "duplicate_token"}
    assert all(v.shape == (2, 2) for v in heads.values())
    assert row["ie"].shape == row["ie_prefix"].shape == (4,) and row["loss_by_position"].shape == (16,)


def test_kl_to_the_unigram_in_both_directions():
    ids = np.random.default_rng(2).integers(0, 12, 4000)
    probes = make_probes(ids, ids[:800], 12, 16, measure_settings())
    q = np.random.default_rng(3).dirichlet(np.ones(12))
    model = unigram_model(q)  # predicts q everywhere
    val = _validation_measures(model, probes, 10, torch.device("cpu"))
    assert float(val["kl_model_unigram"]) == pytest.approx(float(measures.kl_divergence(q, probes.unigram)), rel=1e-5)
    assert float(val["kl_unigram_model"]) == pytest.approx(float(measures.kl_divergence(probes.unigram, q)), rel=1e-5)
    assert float(val["kl_model_unigram"]) != pytest.approx(float(val["kl_unigram_model"]), rel=1e-2)


def test_unigram_direction_finds_a_reachable_target_and_only_then_zero():
    torch.manual_seed(1)
    model = Transformer(ModelConfig(vocab_size=9, block_size=4, d_model=8, n_layer=1, n_head=2, dropout=0.0)).eval()
    peaked = np.eye(9)[0] * 0.92 + 0.01
    # at the init (lm_head weights ~0.02) every logit stays near 0: a peaked distribution is out of reach
    assert unigram_direction(model, peaked, restarts=3, steps=100, seed=0) > 1.0
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 1.0)
        target = torch.softmax(model.lm_head(model.ln_f(torch.randn(8))), -1).double().numpy()
    assert unigram_direction(model, target, restarts=3, steps=100, seed=0) < 1e-6


# --- phases -----------------------------------------------------------------------------------------

STEPS = np.array([0, *np.rint(np.geomspace(10, 10000, 31)).astype(int)])
LOG = np.log10(np.maximum(STEPS, 1))


def sigmoid(center_log: float, sharpness: float = 8.0) -> np.ndarray:
    return 1 / (1 + np.exp(-sharpness * (LOG - center_log)))


def test_zigzag_and_critical_points():
    assert zigzag(np.array([0, 1, 0.95, 1.1, 0, 2]), 0.5) == [(3, "max"), (4, "min")]
    assert zigzag(np.array([3, 2, 1]), 0.1) == []
    values = np.sin(LOG * np.pi)  # on log-steps 1..4: minima at 1.5 and 3.5, a maximum at 2.5
    points = critical_points(STEPS, values, width=0.05, min_swing=0.2)
    assert [p["kind"] for p in points] == ["min", "max", "min"]
    assert [round(math.log10(p["step"]), 1) for p in points] == [1.5, 2.5, 3.5]
    wiggle = values + 0.05 * np.sin(LOG * 40)  # swings of 0.1 are below 0.2 x the range of 2
    assert [p["kind"] for p in critical_points(STEPS, wiggle, width=0.0, min_swing=0.2)] == ["min", "max", "min"]


def test_phase_change_window_brackets_a_joint_change():
    prefix = 0.05 + 0.6 * sigmoid(2.5)
    icl = -0.4 * sigmoid(2.5)
    w = phase_change_window(STEPS, prefix, icl, width=0.05)
    assert w["start"] < 10**2.5 < w["end"] and 10**2.2 < w["start"] and w["end"] < 10**2.8
    assert abs(math.log10(w["peak"]) - 2.5) < 0.1 and w["both_peak_inside"]
    # the ICL score alone changing still places the window
    w = phase_change_window(STEPS, np.full(len(STEPS), 0.05), icl, width=0.05)
    assert 10**2.2 < w["start"] < 10**2.5 < w["end"] < 10**2.8
    # a curve that changes elsewhere: its own fastest step is outside the window
    late_icl = -0.4 * sigmoid(3.5, sharpness=20)
    w = phase_change_window(STEPS, 0.05 + 0.6 * sigmoid(2.0, sharpness=20), late_icl, width=0.05)
    assert not w["both_peak_inside"]


def test_loss_bump_is_found_only_where_the_loss_is_non_convex():
    smooth_loss = 4 - 0.5 * LOG  # linear in log-step: convex, no bump
    bumped = smooth_loss + 0.15 * np.exp(-(((LOG - 2.5) / 0.15) ** 2))  # a bump on it
    assert not loss_bump(STEPS, smooth_loss, 10**2.2, 10**2.8, width=0.05)["nonconvex"]
    result = loss_bump(STEPS, bumped, 10**2.2, 10**2.8, width=0.05)
    assert result["nonconvex"] and result["checkpoints_inside"] >= 5
    assert not loss_bump(STEPS, bumped, 10**3.5, 10**3.9, width=0.05)["nonconvex"]
    convex = 4 - 0.5 * LOG + 0.3 * (LOG - 2.5) ** 2
    assert not loss_bump(STEPS, convex, 10**2.2, 10**2.8, width=0.05)["nonconvex"]
    assert loss_bump(STEPS, -convex, 10**2.2, 10**2.8, width=0.05)["nonconvex"]


def test_the_three_ie_kl_phases_and_their_absence():
    kl = 1.2 - 1.0 * sigmoid(1.3) + 1.2 * sigmoid(2.3)  # falls to a minimum near step 60, then rises
    ie = 1.2 + 1.3 * sigmoid(1.0) - 1.0 * sigmoid(2.3) + 0.4 * sigmoid(3.3)  # high, down, up again
    found = ie_kl_phases(STEPS, ie, kl, width=0.05, min_swing=0.1)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, True)
    assert 1.5 < math.log10(found["unigram_step"]) < 2.0 < math.log10(found["ie_minimum_step"]) < 3.3
    no_rebound = 1.2 + 1.3 * sigmoid(1.0) - 1.0 * sigmoid(2.3)
    found = ie_kl_phases(STEPS, no_rebound, kl, width=0.05, min_swing=0.1)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, False)
    rising_ie = 1.2 + 1.3 * sigmoid(1.0)  # IE never falls: no phase 2
    found = ie_kl_phases(STEPS, rising_ie, kl, width=0.05, min_swing=0.1)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (False, False, False)
    kl_back_down = kl - 1.2 * sigmoid(3.0)  # KL falls back to low while IE rebounds: no phase 3
    found = ie_kl_phases(STEPS, ie, kl_back_down, width=0.05, min_swing=0.1)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, False)
    monotone_kl = 1.2 + 1.2 * sigmoid(2.3)
    found = ie_kl_phases(STEPS, ie, monotone_kl, width=0.05, min_swing=0.1)
    assert not found["phase_1"] and found["unigram_step"] is None


def test_smoothing_and_log_position_derivative():
    x = np.log10(np.arange(1, 41))
    np.testing.assert_allclose(smooth(x, np.full(40, 3.0), 0.2), 3.0)
    two = np.stack([np.arange(40.0), -np.arange(40.0)], axis=1)
    np.testing.assert_allclose(smooth(x, two, 0.1)[:, 0], -smooth(x, two, 0.1)[:, 1])
    loss = 3.0 - 0.25 * np.log(np.arange(1, 41))  # loss linear in ln(index): derivative -0.25 everywhere
    np.testing.assert_allclose(log_position_derivative(np.stack([loss, loss]), 0.0), -0.25, atol=1e-9)
    np.testing.assert_allclose(log_position_derivative(loss, 0.1), -0.25, atol=1e-9)  # smoothing keeps a line
    noisy = loss + 0.05 * np.random.default_rng(0).normal(size=40)
    assert np.abs(log_position_derivative(noisy, 0.1) + 0.25).mean() < np.abs(log_position_derivative(noisy, 0) + 0.25).mean() / 3


def test_a_seed_trained_longer_joins_the_mean_curves_at_the_shared_steps():
    from tinylens.dynamics.plots import _common_steps
    from tinylens.dynamics.summary import Curves

    def curves(steps):
        s = np.array(steps)
        return Curves(s, {"val_loss": s * 1.0}, {"score": np.zeros((len(s), 2, 1)) + s[:, None, None]})

    steps, shared = _common_steps({"1337": curves([0, 5, 10]), "1442": curves([0, 5, 10, 12])})
    assert steps.tolist() == [0, 5, 10]
    assert shared["1442"].metrics["val_loss"].tolist() == [0, 5, 10] and shared["1442"].heads["score"].shape == (3, 2, 1)
    assert shared["1442"].heads["score"][:, 1, 0].tolist() == [0, 5, 10]
    with pytest.raises(ValueError, match=r"steps \[7\] are not checkpoints"):
        curves([0, 5, 10]).at(np.array([5, 7]))
    with pytest.raises(ValueError, match="share 1 checkpoint steps"):
        _common_steps({"1": curves([0, 5]), "2": curves([0, 6])})


# --- the window on the circuits family's composition-over-training figure -------------------------

def test_the_composition_over_training_figure_shades_each_seeds_window():
    import polars as pl
    from matplotlib.patches import Rectangle

    from tinylens.circuits.plots import make_composition_over_training
    from tinylens.dynamics.summary import phase_change_windows

    summary = {"seeds": {"7": {"window": {"start": 20.5, "peak": 40, "end": 80.0}, "phase_change_detected": True},
                         "9": {"window": {"start": 100.0, "peak": 150, "end": 200.0}, "phase_change_detected": True},
                         "11": {"window": {"start": 1.0, "peak": 2, "end": 3.0}, "phase_change_detected": False}}}
    windows = phase_change_windows(summary)
    assert windows == {7: (20.5, 80.0), 9: (100.0, 200.0)}  # none for the seed without a phase change
    steps = [0, 10, 50, 100, 300]
    over = {seed: pl.DataFrame([
        {"seed": seed, "step": s, "layernorm": "ignored", "basis": basis, "kind": "K", "layer_a": 0, "head_a": 0,
         "layer_b": 1, "head_b": 0, "score": 0.1 + 0.001 * s, "baseline_mean": 0.1, "baseline_std": 0.01}
        for s in steps for basis in ("residual", "token")]) for seed in windows}
    fig = make_composition_over_training(over, 7, 1, windows=windows)
    for ax in fig.axes:
        seed = int(ax.get_title().split()[1].rstrip(":"))
        spans = [p for p in ax.patches if isinstance(p, Rectangle) and "phase-change window" in p.get_label()]
        assert len(spans) == 1, ax.get_title()
        x = spans[0].get_x()
        assert (x, x + spans[0].get_width()) == pytest.approx(windows[seed])
    fig = make_composition_over_training({7: over[7]}, 7, 1, windows={})
    for ax in fig.axes:
        assert not ax.patches[1:] and "no phase change detected (training dynamics)" in ax.get_legend_handles_labels()[1]
    with pytest.raises(ValueError, match="metrics/dynamics.json"):
        phase_change_windows({"seeds": {"7": {"peak": 3}}})


def test_source000_phases_each_on_its_own_conditions_at_the_same_checkpoints():
    from tinylens.dynamics.phases import source000_phases

    rng = np.random.default_rng(0)

    def noisy(curve):
        return curve + rng.normal(0, 0.01, len(curve))  # thresholds: 3 x this noise, about 0.03

    kl = 1.2 - 1.0 * sigmoid(1.3) + 1.2 * sigmoid(2.3)  # falls to a minimum near step 60, then rises
    ie = 1.2 + 1.3 * sigmoid(1.0) - 1.0 * sigmoid(2.3) + 0.4 * sigmoid(3.3)  # high, down, up again
    found = source000_phases(STEPS, noisy(ie), noisy(kl), width=0.05, z=3.0)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, True)
    assert 0.005 < found["noise"]["ie"] < 0.02 and found["thresholds"]["kl"] == pytest.approx(3 * found["noise"]["kl"])
    assert 1.5 < math.log10(found["unigram_step"]) < 2.0 < math.log10(found["ie_minimum_step"]) < 3.3
    assert math.log10(found["ie_rebound_step"]) > 3.3
    no_rebound = 1.2 + 1.3 * sigmoid(1.0) - 1.0 * sigmoid(2.3)
    found = source000_phases(STEPS, noisy(no_rebound), noisy(kl), width=0.05, z=3.0)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, False)
    # IE never falls: the unigram phase is still there (KL low, IE high at its minimum), phase 2 is not
    rising_ie = 1.2 + 1.3 * sigmoid(1.0)
    found = source000_phases(STEPS, noisy(rising_ie), noisy(kl), width=0.05, z=3.0)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, False, False)
    # IE high only long after KL's minimum: at s1 it is still in the lower half of its range, so no phase 1
    late_ie = 1.2 + 1.3 * sigmoid(2.8)
    assert not source000_phases(STEPS, noisy(late_ie), noisy(kl), width=0.05, z=3.0)["phase_1"]
    kl_back_down = kl - 1.2 * sigmoid(3.0)  # KL falls back to low while IE rebounds: no phase 3
    found = source000_phases(STEPS, noisy(ie), noisy(kl_back_down), width=0.05, z=3.0)
    assert found["middle"]["kl"] == pytest.approx((kl_back_down.max() + kl_back_down[1:].min()) / 2, abs=0.05)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (True, True, False)
    monotone_kl = 1.2 + 1.2 * sigmoid(2.3)
    found = source000_phases(STEPS, noisy(ie), noisy(monotone_kl), width=0.05, z=3.0)
    assert not found["phase_1"] and found["unigram_step"] is None
    # IE starting high (as a trained LayerNorm's states at initialisation do) and falling a little before KL's
    # minimum is still high there: phase 1 reads levels against the range, not against the first checkpoint
    early_high = 2.7 - 0.3 * sigmoid(1.3) - 1.1 * sigmoid(2.3)  # 2.7 at the start, 2.4 at s1, 1.3 in the end
    found = source000_phases(STEPS, noisy(early_high), noisy(kl), width=0.05, z=3.0)
    assert found["at"]["s1"]["ie"] < found["at"]["start"]["ie"] - 0.2 and found["phase_1"] and found["phase_2"]
    # the same story at a hundredth of the size sits inside the curves' noise: no phase at all
    found = source000_phases(STEPS, noisy(1 + 0.01 * (ie - 1)), noisy(1 + 0.01 * (kl - 1)), width=0.05, z=3.0)
    assert (found["phase_1"], found["phase_2"], found["phase_3"]) == (False, False, False)


def test_the_energy_along_the_forward_pass_per_window_and_its_rises():
    """Per depth the mean IE over the energy windows with its standard error, and per step (depth d to d + 1)
    the windows whose IE rises there: the same numbers as each window's energy computed directly."""
    from tinylens.interventions import run

    ids = np.random.default_rng(4).integers(0, 12, 4000)
    probes = make_probes(ids, ids[:800], 12, 16, measure_settings())
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=12, block_size=16, d_model=8, n_layer=2, n_head=2, dropout=0.0)).eval()
    val = _validation_measures(model, probes, 7, torch.device("cpu"))
    tokens = torch.as_tensor(probes.val[:7, :-1])
    with torch.no_grad():
        trace = run(model, tokens, record=["blocks.*.block_input", "ln_f_input", "ln_f_output"])
        states = [trace[f"blocks.{b}.block_input"] for b in range(2)] + [trace["ln_f_input"], trace["ln_f_output"]]
    per_window = torch.stack([interaction_energy(s) for s in states])  # [depth windows]
    np.testing.assert_allclose(val["ie"].numpy(), per_window.mean(1).numpy(), rtol=1e-9)
    np.testing.assert_allclose(val["ie_se"].numpy(), (per_window.std(1) / 7**0.5).numpy(), rtol=1e-9)
    np.testing.assert_array_equal(val["ie_rises"].numpy(), (per_window[1:] > per_window[:-1]).sum(1).numpy())
    assert val["ie_windows"] == 7
    row, _ = measure_checkpoint(model, probes, measure_settings())
    assert row["ie_rises"].dtype == np.int32 and row["ie_rises"].shape == (3,) and row["ie_se"].shape == (4,)


def test_the_monotone_quantity_is_a_sign_test_per_step_and_its_sentence_says_where_it_rises():
    from tinylens.dynamics.summary import _monotone_sentence, ie_along_depth
    from tinylens.wording import disagreements

    metrics = {"ie": np.array([[1.0, 1.2, 1.5, 1.4, 1.6]]), "ie_se": np.full((1, 5), 0.01),
               "ie_windows": np.array([100]), "ie_rises": np.array([[95, 90, 10, 80]], dtype=np.int32)}
    along = ie_along_depth(metrics, n_layer=3)
    assert [t["to"] for t in along["steps"]] == ["block 1", "block 2", "block 3", "ln_f"]
    assert [t.get("block") for t in along["steps"]] == [0, 1, 2, None]  # 0-based in the metrics
    assert [t["rises"]["direction"] for t in along["steps"]] == ["above", "above", "below", "above"]
    other = ie_along_depth({**metrics, "ie_rises": np.array([[95, 52, 5, 20]], dtype=np.int32)}, n_layer=3)
    doc = {"original_seed": 1, "seeds": {"1": {"ie_along_depth": along}, "2": {"ie_along_depth": other}},
           "headline": {"ie_rises_through_every_block": {"1": False, "2": False}}}
    text = _monotone_sentence(doc)
    assert ("in seed 1's final model it rises through blocks 1 and 2 (shares 0.9 to 0.95, largest p = ") in text
    assert "; falls through block 3 (share 0.1, 95% interval " in text and "; and it rises through ln_f (share 0.8, " in text
    assert "it rises through every block in 0 of 2 models; in every model it rises through block 1 and falls " \
           "through block 3." in text
    assert disagreements(text) == []
