"""The final LayerNorm's scale invariance, the noise experiment, the feed-forward-only endpoint and
the to-scale tip-to-tail drawing."""

import numpy as np
import pytest
import torch

from tinylens.measures import cosine
from tinylens.model import ModelConfig, Transformer
from tinylens.supporting.layernorm import noise_experiment, scaling_deviation
from tinylens.supporting.summary import summarize_noise, summarize_scaling
from tinylens.supporting.vector_sums import angle_degrees, ffwd_only_endpoint, tip_to_tail, vector_sum_paths


def make_model(seed=0):
    torch.manual_seed(seed)
    m = Transformer(ModelConfig(vocab_size=11, block_size=12, d_model=16, n_layer=3, n_head=4, dropout=0.0))
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(10.0) if p.dim() > 1 else p.add_(0.3 * torch.randn_like(p))
    return m.eval()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 11, (9, 8), generator=torch.Generator().manual_seed(2))


def test_scaling_the_last_block_changes_ln_f_only_through_eps(tokens):
    model = make_model()
    cols = scaling_deviation(model, tokens, [0.1, 10.0, 100.0])
    assert cols["factor"].tolist() == [0.1] * 9 + [10.0] * 9 + [100.0] * 9
    scale = np.abs(cols["output_norm"]).max()
    # what eps does not explain is float32 rounding of the LayerNorm output
    assert cols["residual_deviation"].max() < 1e-5 * scale
    # at c = 0.1 eps matters (var of 0.1 x is 100x smaller), and the measured change is that one
    low = cols["factor"] == 0.1
    assert cols["eps_predicted_deviation"][low].max() > 10 * cols["residual_deviation"][low].max()
    np.testing.assert_allclose(cols["max_abs_deviation"], cols["eps_predicted_deviation"], atol=1e-5 * scale)
    summary = summarize_scaling(cols)
    assert set(summary) == {"0.1", "10", "100"}
    assert summary["10"]["max_hellinger"] < 1e-3


def test_without_eps_the_scaling_deviation_is_float_rounding(tokens):
    model = make_model()
    model.ln_f.eps = 0.0
    cols = scaling_deviation(model, tokens, [0.1, 10.0, 100.0])
    assert cols["eps_predicted_deviation"].max() == 0.0
    assert cols["max_abs_deviation"].max() < 1e-5 * cols["output_norm"].max()
    assert cols["hellinger"].max() < 1e-3


def test_noise_moves_the_input_by_the_asked_amount(tokens):
    model = make_model()
    cols = noise_experiment(model, tokens, [1e-7, 0.5, 3.0], seed=0)
    levels = cols["noise_level"]
    tiny = levels == 1e-7
    np.testing.assert_allclose(cols["input_cosine"][tiny], 1.0, atol=1e-6)
    np.testing.assert_allclose(cols["output_norm_ratio"][tiny], 1.0, atol=1e-5)
    assert cols["hellinger"][tiny].max() < 1e-4
    # |x + e|^2 = |x|^2 (1 + l^2 + 2 l cos(x, e)), and cos(x, x + e) = (1 + l cos(x, e)) / (|x + e| / |x|)
    for level in (0.5, 3.0):
        sel = levels == level
        ratio, cos_in = cols["input_norm_ratio"][sel], cols["input_cosine"][sel]
        cos_xe = (ratio**2 - 1 - level**2) / (2 * level)
        np.testing.assert_allclose(cos_in, (1 + level * cos_xe) / ratio, atol=1e-5)
    assert cols["input_cosine"][levels == 3.0].mean() < cols["input_cosine"][levels == 0.5].mean()
    assert summarize_noise(cols)["3"]["n_prompts"] == 9


def test_with_attention_silenced_the_ffwd_only_endpoint_is_the_model(tokens):
    model = make_model(seed=1)
    full = ffwd_only_endpoint(model, tokens)
    assert (full["hellinger"] > 1e-3).all() and (full["cosine"] < 1 - 1e-6).all()
    with torch.no_grad():
        for block in model.blocks:
            block.sa.proj.weight.zero_()
            block.sa.proj.bias.zero_()
    silent = ffwd_only_endpoint(model, tokens)
    np.testing.assert_allclose(silent["cosine"], 1.0, atol=1e-6)
    np.testing.assert_allclose(silent["norm_ratio"], 1.0, atol=1e-6)
    assert silent["hellinger"].max() < 1e-4
    assert (silent["sa_hellinger"] > 1e-3).all()  # the attention-only endpoint is then x_1 alone


def test_with_the_feed_forward_silenced_the_attention_only_endpoint_is_the_model(tokens):
    model = make_model(seed=1)
    with torch.no_grad():
        for block in model.blocks:
            block.ffwd.net[2].weight.zero_()
            block.ffwd.net[2].bias.zero_()
    silent = ffwd_only_endpoint(model, tokens)
    np.testing.assert_allclose(silent["sa_cosine"], 1.0, atol=1e-6)
    np.testing.assert_allclose(silent["sa_norm_ratio"], 1.0, atol=1e-6)
    assert silent["sa_hellinger"].max() < 1e-4


def test_the_ffwd_only_endpoint_matches_a_hand_computation(tokens):
    model = make_model(seed=2)
    cols = ffwd_only_endpoint(model, tokens)
    with torch.no_grad():
        x = model.embed(tokens)
        f, a = x[:, -1].clone(), x[:, -1].clone()
        for blk in model.blocks:
            sa = blk.sa(blk.ln1(x))[0]
            ffwd = blk.ffwd(blk.ln2(x + sa))
            f += ffwd[:, -1]
            a += sa[:, -1]
            x = x + sa + ffwd
        p_f = torch.softmax(model.unembed(f[:, None])[:, 0].double(), -1)
        p_a = torch.softmax(model.unembed(a[:, None])[:, 0].double(), -1)
        q = torch.softmax(model.unembed(x)[:, -1].double(), -1)
    np.testing.assert_allclose(cols["cosine"], cosine(f, x[:, -1]).numpy(), atol=1e-6)
    np.testing.assert_allclose(cols["sa_cosine"], cosine(a, x[:, -1]).numpy(), atol=1e-6)
    np.testing.assert_allclose(cols["sa_norm_ratio"], (a.norm(dim=-1) / x[:, -1].norm(dim=-1)).numpy(), atol=1e-6)
    for key, p in (("hellinger", p_f), ("sa_hellinger", p_a)):
        h = torch.sqrt(0.5 * ((p.sqrt() - q.sqrt()) ** 2).sum(-1)).numpy()
        np.testing.assert_allclose(cols[key], h, atol=1e-6)


def test_tip_to_tail_keeps_every_length_and_every_angle_to_the_running_sum():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(13, 20)) * rng.uniform(0.1, 3.0, size=(13, 1))
    points = tip_to_tail(vectors)
    assert points.shape == (14, 2) and np.allclose(points[0], 0) and points[1, 1] == 0
    arrows = np.diff(points, axis=0)
    np.testing.assert_allclose(np.linalg.norm(arrows, axis=1), np.linalg.norm(vectors, axis=1), rtol=1e-10)
    running = np.cumsum(vectors, axis=0)
    np.testing.assert_allclose(np.linalg.norm(points[1:], axis=1), np.linalg.norm(running, axis=1), rtol=1e-9)
    for i in range(1, len(vectors)):  # the angle of arrow i to the sum it starts from
        assert angle_degrees(arrows[i], points[i]) == pytest.approx(angle_degrees(vectors[i], running[i - 1]), abs=1e-6)
    assert points[-1, 1] >= 0


def test_vector_sum_paths_add_up_to_the_model(tokens):
    model = make_model(seed=3)
    paths = vector_sum_paths(model, tokens[:2], ["p0", "p1"])
    for path in paths:
        assert path["sum_check"] < 1e-4
        assert len(path["full"]["points"]) == 1 + 1 + 2 * 3 and len(path["ffwd_only"]["points"]) == 1 + 1 + 3
        assert np.linalg.norm(path["full"]["points"][-1]) == pytest.approx(path["final_norm"], rel=1e-5)
        assert np.linalg.norm(path["ffwd_only"]["points"][-1]) == pytest.approx(path["ffwd_only_norm"], rel=1e-5)
        assert 0 < path["endpoint_angle_degrees"] < 180


def test_tables_split_by_mode_keep_their_row_order():
    from tinylens.supporting.summary import split_by_mode

    cols = {"mode": ["corpus", "heldout", "corpus", "paper"], "x": [1, 2, 3, 4]}
    split = split_by_mode(cols, ["corpus", "heldout"])
    assert list(split) == ["corpus", "heldout"]
    assert split["corpus"]["x"].tolist() == [1, 3] and split["heldout"]["x"].tolist() == [2]
    assert split["heldout"]["mode"].tolist() == ["heldout"]


def test_the_endpoints_claims_are_tested_beside_each_other():
    """"Shorter" is the sign test of |end| < |x_7| over prompts; "closely aligned" the paired t-test of the
    feed-forward-only endpoint's cosine against the attention-only one's."""
    from tinylens.supporting.summary import summarize_endpoint

    n = 100
    ramp = np.linspace(-0.01, 0.01, n)
    cols = {"cosine": 0.9 + ramp, "norm_ratio": np.r_[np.full(80, 1.1), np.full(20, 0.9)], "final_norm": np.ones(n),
            "hellinger": 0.2 + ramp, "sa_cosine": 0.3 + ramp[::-1], "sa_norm_ratio": np.full(n, 0.5),
            "sa_hellinger": 0.6 + ramp}
    s = summarize_endpoint(cols)
    tests = s["tests"]
    assert tests["ffwd_shorter"]["share"] == 0.2 and tests["ffwd_shorter"]["direction"] == "below"  # longer
    assert tests["sa_shorter"]["direction"] == "above"
    assert tests["cosine_ffwd_minus_sa"]["mean"] == pytest.approx(0.6) and tests["cosine_ffwd_minus_sa"]["direction"] == "above"
    assert tests["hellinger_ffwd_minus_sa"]["direction"] == "below"
    assert s["sa_norm_ratio"]["mean"] == pytest.approx(0.5)
