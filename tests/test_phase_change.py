"""The phase-change family (method.md §8b): detection on hand-built curves, the ICL estimator, the
data mixture and probes, the attention-only model."""

import numpy as np
import pytest
import torch

from tinylens.dynamics.icl import icl_score, single_position_score
from tinylens.phase_change.data import MixtureSettings, check_probe_periods, mixture_source, mixture_windows
from tinylens.phase_change.detect import (
    DetectSettings,
    detect,
    loss_bump_test,
    lower_convex_envelope,
    uniform_prefix_matching,
)
from tinylens.phase_change.model import AttentionOnly, AttentionOnlyConfig
from tinylens.phase_change.run import checkpoint_steps, per_sequence_prefix_matching

SETTINGS = DetectSettings(smooth_decades=0.05, z=3.0, min_rise=0.1, min_share=0.5, max_decades=0.5, min_swing=0.1)
UNIFORM = 0.07


def hand_built(rise_at: float | None, seed: int = 0) -> dict:
    """Curves over log-spaced checkpoints; with ``rise_at`` every signal jumps there (a logistic in
    log-step 0.05 decades wide), without it only the ICL score, the copy loss and copying change."""
    rng = np.random.default_rng(seed)
    steps = np.array(checkpoint_steps(10, 1.08, 1200))
    x = np.log10(np.maximum(steps, 1))
    jump = 1 / (1 + np.exp(-(x - np.log10(rise_at)) / 0.05)) if rise_at else np.zeros_like(x)
    slow = np.clip((x - 1) / 2, 0, 1)  # a slow drift over the whole run
    noise = lambda scale: scale * rng.standard_normal(len(steps))  # noqa: E731
    return {
        "step": steps, "tokens": steps * 2048,
        "prefix_matching": UNIFORM + 0.5 * jump + noise(0.003), "prefix_matching_se": np.full(len(steps), 0.005),
        "copying": -0.2 + jump + 0.5 * slow,
        "copy_loss_drop": -1.5 * jump - 0.3 * slow + noise(0.01), "copy_loss_drop_se": np.full(len(steps), 0.03),
        "mixture_icl": -0.8 * jump - 0.2 * slow + noise(0.005), "mixture_icl_se": np.full(len(steps), 0.02),
        "mixture_loss": 4 - 0.6 * x + 0.25 * np.exp(-0.5 * ((x - np.log10(rise_at or 300)) / 0.04) ** 2) * (rise_at is not None)
        + noise(0.005),
    }


def test_a_clear_rise_is_detected_with_its_window():
    verdict = detect(hand_built(300.0), UNIFORM, SETTINGS)
    assert verdict["phase_change_detected"]
    w = verdict["window"]
    assert w["start"] < 300 < w["end"]
    assert abs(w["peak"] / 300 - 1) < 0.1
    assert 0.7 < w["end"] / w["start"] and w["end"] / w["start"] < 2.5  # a short window, not the whole run
    assert w["peak_tokens"] == round(w["peak"] * 2048)
    assert all(t["pass"] for t in verdict["tests"].values())
    assert verdict["loss_bump"]["bump"]


def test_no_rise_is_not_detected():
    verdict = detect(hand_built(None), UNIFORM, SETTINGS)
    assert not verdict["phase_change_detected"]
    assert not verdict["tests"]["prefix_matching"]["pass"]
    assert not verdict["loss_bump"]["bump"]


def test_a_rise_inside_the_noise_is_not_detected():
    curves = hand_built(300.0)
    curves["prefix_matching_se"] = np.full(len(curves["step"]), 0.3)  # rise of 0.5 at z < 3
    assert not detect(curves, UNIFORM, SETTINGS)["phase_change_detected"]


def test_a_slow_drift_is_not_a_phase_change():
    curves = hand_built(None)
    x = np.log10(np.maximum(curves["step"], 1))
    curves["prefix_matching"] = UNIFORM + 0.5 * (x - x.min()) / (x.max() - x.min())  # straight in log-step
    verdict = detect(curves, UNIFORM, SETTINGS)
    tests = verdict["tests"]
    assert not tests["rise_in_window"]["pass"] or not tests["window_width"]["pass"]
    assert not verdict["phase_change_detected"]


def test_every_probe_period_must_pass_on_its_own():
    """Two periods: the best head rises at one only. The mean over the periods clears min_rise (the old rule),
    the per-period test does not."""
    curves = hand_built(300.0)
    flat = UNIFORM + np.zeros(len(curves["step"]))
    se = curves["prefix_matching_se"]
    curves["prefix_matching"] = {25: curves["prefix_matching"], 29: flat}
    curves["prefix_matching_se"] = {25: se, 29: se}
    verdict = detect(curves, {25: UNIFORM, 29: UNIFORM}, SETTINGS)
    per_period = verdict["tests"]["prefix_matching"]["per_period"]
    assert per_period["25"]["pass"] and not per_period["29"]["pass"]
    assert not verdict["tests"]["prefix_matching"]["pass"] and not verdict["phase_change_detected"]
    mean = np.mean([curves["prefix_matching"][25], flat], axis=0)[verdict["window"]["end_index"]]
    assert mean - UNIFORM > SETTINGS.min_rise  # what the mean over the periods would have passed
    curves["prefix_matching"][29] = curves["prefix_matching"][25]
    assert detect(curves, {25: UNIFORM, 29: UNIFORM}, SETTINGS)["phase_change_detected"]


def test_lower_convex_envelope_is_convex_and_below():
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 3, 40))
    y = rng.normal(size=40)
    env = lower_convex_envelope(x, y)
    assert np.all(env <= y + 1e-12)
    slopes = np.diff(env) / np.diff(x)
    assert np.all(np.diff(slopes) >= -1e-9)


def test_loss_bump_needs_to_exceed_the_noise():
    steps = np.array(checkpoint_steps(10, 1.08, 1200))
    x = np.log10(np.maximum(steps, 1))
    rng = np.random.default_rng(2)
    bump = 0.02 * np.exp(-0.5 * ((x - 2.5) / 0.05) ** 2)
    noisy = 4 - 0.6 * x + bump + 0.05 * rng.standard_normal(len(x))
    quiet = 4 - 0.6 * x + bump + 0.001 * rng.standard_normal(len(x))
    assert not loss_bump_test(steps, noisy, 200, 500, 0.05, 3.0)["bump"]
    assert loss_bump_test(steps, quiet, 200, 500, 0.05, 3.0)["bump"]


def test_uniform_prefix_matching_is_the_measured_score_of_a_uniform_head():
    context, period = 40, 7
    tokens = torch.arange(context)[None] % period
    pattern = torch.tril(torch.ones(context, context)) / torch.arange(1, context + 1)[:, None]
    measured = per_sequence_prefix_matching(pattern[None, None], tokens, period)
    assert float(measured) == pytest.approx(uniform_prefix_matching(context, period), rel=1e-6)


def test_icl_score_bands_and_standard_error():
    rng = np.random.default_rng(3)
    loss = rng.normal(3.0, 1.0, size=(4000, 64))
    loss[:, 40:] -= 0.25
    mean, se = icl_score(loss, (4, 11), (40, 62))
    assert mean == pytest.approx(-0.25, abs=4 * se)
    assert se == pytest.approx(np.sqrt(1 / 8 + 1 / 23) / np.sqrt(4000), rel=0.1)
    single, single_se = single_position_score(loss, (6, 62))
    assert single_se > 2 * se  # the single-position form is the noisier one
    with pytest.raises(ValueError, match="late band"):
        icl_score(loss, (4, 11), (40, 64))


def test_mixture_windows_repeat_at_a_training_period():
    ids = np.arange(10_000) % 9973
    mixture = MixtureSettings(repeat_fraction=1.0, period_min=5, period_max=9)
    w = mixture_windows(ids, 50, 33, mixture, np.random.default_rng(0))
    for row in w:
        period = next(p for p in range(5, 10) if np.array_equal(row[p:], row[:-p]))
        assert 5 <= period <= 9
    plain = mixture_windows(ids, 50, 33, MixtureSettings(0.0, 5, 9), np.random.default_rng(0))
    assert np.all(np.diff(plain, axis=1) == 1)  # consecutive text


def test_the_second_dataset_is_random_tokens_repeated_with_no_text():
    ids = (np.arange(20_000) % 50).astype(np.uint8)  # text: 0, 1, 2, ... (consecutive ids)
    mixture = MixtureSettings(repeat_fraction=1.0, period_min=5, period_max=9, source="random")
    alphabet = mixture_source(ids, mixture)
    assert alphabet.tolist() == list(range(50))
    w = mixture_windows(alphabet, 200, 33, mixture, np.random.default_rng(0))
    for row in w:
        assert any(np.array_equal(row[p:], row[:-p]) for p in range(5, 10))
    assert np.mean(np.diff(w[:, :5], axis=1) == 1) < 0.1  # not consecutive text: random tokens
    plain = mixture_windows(alphabet, 200, 33, MixtureSettings(0.0, 5, 9, source="random"), np.random.default_rng(0))
    assert np.mean(np.diff(plain, axis=1) == 1) < 0.1 and set(np.unique(plain)) <= set(range(50))
    assert "random tokens, 100% of windows repeated at period 5-9" == mixture.label


def test_probe_periods_must_be_alias_free():
    """A probe period is refused when a multiple of it below the context is a multiple of a training period
    below the context: 7 (14, 21), 26 (= 2 x 13), 27 (54 = 3 x 18); 25, 29, 31 are alias-free at 12-24."""
    mixture = MixtureSettings(repeat_fraction=0.5, period_min=12, period_max=24)
    check_probe_periods([25, 29, 31], mixture, 64)
    for period, multiples in ((7, r"\[14, 21, 28, 42, 56, 63\]"), (16, r"\[16, 32, 48\]"), (26, r"\[26, 52\]"),
                              (27, r"\[54\]")):
        with pytest.raises(ValueError, match=rf"{period} is aliased with the training periods 12-24: its multiple\(s\) "
                                             rf"{multiples}"):
            check_probe_periods([period, 29], mixture, 64)
    check_probe_periods([16, 29], MixtureSettings(0.0, 12, 24), 64)  # plain text repeats at no period
    with pytest.raises(ValueError, match=r"least common multiple \(12\) inside the context \(64\): one fixed "
                                         r"look-back of 11"):
        check_probe_periods([4, 6], MixtureSettings(0.0, 12, 24), 64)
    with pytest.raises(ValueError, match="33 repeated twice exceeds the context"):
        check_probe_periods([29, 33], mixture, 64)


def fixed_distance_model(lookback: int, context: int = 64, vocab: int = 65) -> AttentionOnly:
    """A 1-layer, 1-head model whose head attends from every query i >= lookback to key i - lookback and to
    nothing else worth counting: positions one-hot in the residual stream, W_K the identity, W_Q the shift by
    ``lookback`` (scaled so the softmax is nearly hard). A fixed-distance head, learnt from no data."""
    d = 2 * context
    model = AttentionOnly(AttentionOnlyConfig(vocab, context, d, 1, 1)).eval()
    with torch.no_grad():
        model.tok_emb.weight.zero_()
        model.pos_emb.weight.copy_(torch.eye(context, d))
        shift = torch.zeros(d, d)  # q = x @ shift: position i's one-hot -> position i - lookback's
        for i in range(lookback, context):
            shift[i, i - lookback] = 1.0
        w = model.attn[0].qkv.weight  # [3d d], y = x @ W.T
        w.zero_()
        w[:d] = 40.0 * shift.T
        w[d : 2 * d] = torch.eye(d)
        w[2 * d :] = torch.eye(d)
    return model


def _fixed_distance_scores(model: AttentionOnly, periods, context: int = 64) -> dict[int, tuple[float, float]]:
    """The head's prefix matching (mean, standard error) per period, measured as every run measures it."""
    from tinylens.phase_change.data import Probes, ProbeSettings, tiled
    from tinylens.phase_change.run import measure

    rng = np.random.default_rng(0)
    repeated = {p: np.stack([tiled(rng.choice(np.arange(5, 60), size=p, replace=False), context + 1)
                             for _ in range(16)]).astype(np.int64) for p in periods}
    text = rng.integers(0, 65, size=(4, context + 1))
    probes = Probes(val=text, mixture=text, final=text, repeated=repeated, unigram=np.full(65, 1 / 65))
    ps = ProbeSettings(val_windows=4, mixture_windows=4, final_windows=4, energy_windows=2, probe_periods=tuple(periods), sequences=16,
                       exclude=5, early_band=(4, 10), late_band=(40, 62), single_positions=(6, 62),
                       baseline_samples=2, seed=0)
    _, heads, _ = measure(model, probes, ps, final=False)
    return {h["period"]: (h["prefix_matching"], h["prefix_matching_se"]) for h in heads}


def test_a_fixed_distance_head_passes_at_an_aliased_period_and_fails_at_the_defaults(config):
    """A head that only looks 13 back (what windows repeated at period 14, inside small's training periods
    12-24, reward) scores like an induction head on probes at period 7 (14 = 2 x 7): the per-period test
    passes there, and the old probes [7, 29] passed on their mean. At small's alias-free defaults it fails at
    every period, and the configuration refuses period 7."""
    from tinylens.config import resolve_preset
    from tinylens.phase_change.detect import prefix_matching_tests

    small = resolve_preset(config, "small")["phase_change"]
    defaults = small["probes"]["probe_periods"]
    mixture = MixtureSettings(**small["base"]["mixture"])
    model = fixed_distance_model(13)
    scores = _fixed_distance_scores(model, [7, 29, *defaults])
    uniform = {p: uniform_prefix_matching(64, p) for p in scores}

    def tested(periods):  # a head at its init (the uniform score) at step 0, these scores at the window's end
        pm = {p: np.array([uniform[p], scores[p][0]]) for p in periods}
        se = {p: np.array([0.01, scores[p][1]]) for p in periods}
        return prefix_matching_tests(pm, se, {p: uniform[p] for p in periods}, 0, 1, SETTINGS)[0]

    assert scores[7][0] > 0.85 and tested([7])["pass"]  # aliased (queries 7-12 have no key 13 back): a fixed-distance head looks like induction
    old_mean = np.mean([scores[7][0], scores[29][0]]) - np.mean([uniform[7], uniform[29]])
    assert old_mean > SETTINGS.min_rise  # the mean over [7, 29] cleared min_rise: the old rule passed it
    assert not tested([7, 29])["pass"]  # per period, 29 fails
    at_defaults = tested(defaults)
    assert not any(t["pass"] for t in at_defaults["per_period"].values()) and not at_defaults["pass"]
    with pytest.raises(ValueError, match="7 is aliased with the training periods 12-24"):
        check_probe_periods([7, *defaults], mixture, 64)
    check_probe_periods(defaults, mixture, 64)


def test_previous_token_score_of_hand_built_patterns():
    from tinylens.phase_change.detect import uniform_previous_token
    from tinylens.phase_change.mechanism import previous_token_scores

    t = 12
    previous = torch.zeros(t, t)
    previous[0, 0] = 1.0
    previous[torch.arange(1, t), torch.arange(t - 1)] = 1.0  # every query on the token before it
    uniform = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
    scores = previous_token_scores(torch.stack([previous, uniform])[None])  # [1 batch=1, heads=2]
    assert scores[0, 0] == pytest.approx((t - 1) / t)
    assert scores[0, 1] == pytest.approx(uniform_previous_token(t))


def test_ablation_zeroes_exactly_the_named_head():
    """A head whose W_O is zero changes nothing when zeroed (raise exactly 0); another head's zeroing moves
    the second copy's loss."""
    from tinylens.phase_change.mechanism import ablation_rows

    torch.manual_seed(0)
    model = AttentionOnly(AttentionOnlyConfig(vocab_size=20, context=16, d_model=16, n_layer=2, n_head=2)).eval()
    with torch.no_grad():
        model.attn[1].out.weight[:, :8] = 0  # W_O rows of layer 1's head 0 (columns of nn.Linear's weight)
        for p in model.parameters():
            p.mul_(20)  # large weights: every other head matters
    seqs = np.stack([np.resize(np.random.default_rng(i).permutation(20)[:7], 17) for i in range(8)])
    rows = {(r["layer"], r["head"]): r for r in ablation_rows(model, {7: seqs})}
    assert rows[1, 0]["ablation_raise"] == 0 and rows[1, 0]["ablation_raise_se"] == 0
    assert all(abs(rows[k]["ablation_raise"]) > 1e-3 for k in ((0, 0), (0, 1), (1, 1)))


def test_ablation_test_needs_the_best_head_beyond_the_control():
    from tinylens.phase_change.detect import ablation_test

    assert ablation_test((0.5, 0.05), (0.01, 0.05), 3.0)["pass"]
    specific = ablation_test((2.5, 0.05), (0.4, 0.02), 3.0)  # the control raises it too, far less: specific
    assert specific["pass"] and specific["control_raises_by_z"]
    assert not ablation_test((0.5, 0.05), (0.4, 0.05), 3.0)["pass"]  # the control matters nearly as much (z 1.4)
    assert not ablation_test((0.1, 0.05), (0.0, 0.01), 3.0)["pass"]  # z = 2 < 3
    assert not ablation_test((0.5, 0.05), None, 3.0)["pass"]


def test_k_composition_is_the_circuits_familys_score_on_the_attention_only_model():
    """Residual basis, LayerNorm gains folded (P diag(g) W for every reading matrix): the score of
    L = W_V^A W_O^A (read through layer 0's LayerNorm) with R = (W_QK^B)^T, written out densely here."""
    from tinylens.phase_change.mechanism import composition_rows, random_pairs

    torch.manual_seed(1)
    model = AttentionOnly(AttentionOnlyConfig(vocab_size=11, context=8, d_model=12, n_layer=2, n_head=3))
    with torch.no_grad():
        for ln in model.ln:
            ln.weight.uniform_(0.5, 2.0)
    rows = composition_rows(model, random_pairs(model, 50, 0))
    assert len(rows) == 9 and {(r["layer_a"], r["layer_b"]) for r in rows} == {(0, 1)}
    d, dh = 12, 4
    centre = torch.eye(d, dtype=torch.float64) - 1 / d

    def read(layer, w):  # [d dh] -> P diag(g) W
        return centre @ torch.diag(model.ln[layer].weight.double().detach()) @ w

    qkv = [a.qkv.weight.double().detach() for a in model.attn]
    for r in rows:
        a, b = r["head_a"], r["head_b"]
        w_v = qkv[0][2 * d + a * dh : 2 * d + (a + 1) * dh].T
        w_o = model.attn[0].out.weight.double().detach().T[a * dh : (a + 1) * dh]
        w_q, w_k = qkv[1][b * dh : (b + 1) * dh].T, qkv[1][d + b * dh : d + (b + 1) * dh].T
        left = read(0, w_v) @ w_o
        right = (read(1, w_q) @ read(1, w_k).T).T
        expected = torch.linalg.norm(left @ right) / (torch.linalg.norm(left) * torch.linalg.norm(right))
        assert r["k_composition"] == pytest.approx(float(expected), rel=1e-9)
        assert 0 < r["baseline_mean"] < 1 and r["baseline_std"] > 0


def test_the_previous_token_head_must_form_in_or_before_the_window():
    from tinylens.phase_change.detect import previous_token_test

    steps = np.array(checkpoint_steps(10, 1.08, 1200), dtype=float)
    x = np.log10(np.maximum(steps, 1))
    window = detect(hand_built(300.0), UNIFORM, SETTINGS)["window"]  # about steps 250-360
    se = np.full(len(steps), 0.005)

    def rising_at(step):
        return 0.06 + 0.5 / (1 + np.exp(-(x - np.log10(step)) / 0.05))

    early = previous_token_test(steps, rising_at(120.0), se, 0.06, window, SETTINGS)
    assert early["pass"] and early["window"]["peak"] < window["start"]
    # formed early by min_rise, but its own sharpest rise comes after the window: not the circuit's first half
    late = previous_token_test(steps, 0.3 * (rising_at(100.0) - 0.06) + rising_at(900.0), se, 0.06, window, SETTINGS)
    assert late["formed"] and not late["in_or_before_window"] and not late["pass"]
    flat = previous_token_test(steps, np.full(len(steps), 0.06), se, 0.06, window, SETTINGS)
    assert not flat["pass"] and not flat["formed"]


def test_k_composition_rise_and_level_against_random_heads():
    from tinylens.phase_change.detect import composition_tests

    window = {"start_index": 2, "end_index": 5}
    std, mean = np.full(8, 0.01), np.full(8, 0.1)
    rising = np.array([0.1, 0.1, 0.1, 0.12, 0.18, 0.25, 0.26, 0.26])
    rise, level = composition_tests(rising, mean, std, window, 3.0)
    assert rise["pass"] and rise["z"] == pytest.approx(15) and level["pass"] and level["z"] == pytest.approx(15)
    early = np.array([0.1, 0.3, 0.3, 0.3, 0.29, 0.29, 0.29, 0.29])  # composed before the window, level after
    rise, level = composition_tests(early, mean, std, window, 3.0)
    assert not rise["pass"] and level["pass"]
    rise, level = composition_tests(mean + 0.02, mean, std, window, 3.0)  # 2 std above random heads
    assert not rise["pass"] and not level["pass"]
    assert not any(t["pass"] for t in composition_tests(None, None, None, window, 3.0))


def test_nonconvex_stretches_count_each_bump_beyond_the_noise():
    from tinylens.phase_change.detect import nonconvex_stretches

    steps = np.array(checkpoint_steps(10, 1.08, 2000))
    x = np.log10(np.maximum(steps, 1))
    rng = np.random.default_rng(4)
    convex = 4 - 0.6 * x + 0.002 * rng.standard_normal(len(x))
    bump = lambda at: 0.2 * np.exp(-0.5 * ((x - np.log10(at)) / 0.06) ** 2)  # noqa: E731
    assert nonconvex_stretches(steps, convex, 0.05, 3.0)["count"] == 0
    one = nonconvex_stretches(steps, convex + bump(300), 0.05, 3.0)
    assert one["count"] == 1 and one["stretches"][0]["start"] < 300 < one["stretches"][0]["end"]
    two = nonconvex_stretches(steps, convex + bump(60) + bump(800), 0.05, 3.0)
    assert two["count"] == 2 and [s["start"] < at < s["end"] for s, at in zip(two["stretches"], (60, 800))] == [True] * 2


def test_the_best_head_is_the_best_at_its_worst_period():
    """Head (1, 0) scores 0.9 at one period and the uniform score at the other (mean 0.47); head (1, 1) 0.4
    at both: the best head is (1, 1), which the mean over periods would not choose."""
    from tinylens.phase_change.summary import best_head

    uniform = {25: 0.03, 29: 0.03}
    rows = [(1, 0, 25, 0.9), (1, 0, 29, 0.03), (1, 1, 25, 0.4), (1, 1, 29, 0.4), (0, 0, 25, 0.05), (0, 0, 29, 0.05)]
    heads = {"step": np.full(6, 100), "layer": np.array([r[0] for r in rows]), "head": np.array([r[1] for r in rows]),
             "period": np.array([r[2] for r in rows]), "prefix_matching": np.array([r[3] for r in rows])}
    assert best_head(heads, uniform) == (1, 1)
    assert best_head(heads, uniform, layer=0) == (0, 0)


def test_a_rule_test_that_passes_in_every_control_is_named():
    from tinylens.phase_change.schemas import TESTS
    from tinylens.phase_change.summary import rule_report, verdict

    def seed(failing):
        return {"tests": {t: {"pass": t not in failing} for t in TESTS}}

    runs = {"main": {"seeds": {"0": seed(set())}}, "one_layer": {"seeds": {"0": seed({"prefix_matching"}),
                                                                          "1": seed({"k_composition"})}}}
    runs["main"]["seeds"]["1"] = seed({"copying"})
    report = rule_report(runs, "main", ["prefix_matching", "copying"])
    assert report["fails_in_controls"]["prefix_matching"] == ["one_layer/0"]
    assert report["fails_in_reference"]["copying"] == ["main/1"]
    assert report["rule_tests_never_failing"] == ["copying"]
    assert report["descriptive_tests_failing"] == ["k_composition"]
    assert verdict(seed({"copying"})["tests"], ["prefix_matching"]) and not verdict(seed({"copying"})["tests"], TESTS)
    with pytest.raises(ValueError, match="names tests"):
        verdict({}, ["prefix_matching"])


def test_the_sensitivity_grid_moves_the_thresholds():
    """A best head 0.5 above the uniform head's: detected at min_rise 0.05 and 0.3, not at 0.6; a z of 1000
    fails it too."""
    from tinylens.phase_change.summary import VerdictSettings, sensitivity

    c = hand_built(300.0)
    n = len(c["step"])
    evidence = {"settings": {"context": 64}, "curves": c, "uniform": {25: UNIFORM}, "periods": [25],
                "head": {"prefix_matching": {25: c["prefix_matching"]}, "prefix_matching_se": {25: c["prefix_matching_se"]},
                         "copying": c["copying"], "ablation": (1.0, 0.01)},
                "control_ablation": (0.0, 0.01), "previous": None, "pair": None, "best": (1, 0)}
    assert n > 3
    grid = sensitivity({"main": {0: evidence}}, SETTINGS,
                       VerdictSettings(rule=["prefix_matching"], sensitivity={"min_rise": [0.05, 0.3, 0.6], "z": [3, 1000]}))
    assert [(r["min_rise"], r["z"], r["detected_seeds"]["main"]) for r in grid] == [
        (0.05, 3, 1), (0.05, 1000, 0), (0.3, 3, 1), (0.3, 1000, 0), (0.6, 3, 0), (0.6, 1000, 0)]


def test_checkpoints_are_dense_enough_to_locate_a_window_within_ten_percent():
    steps = np.array(checkpoint_steps(10, 1.08, 1200))
    assert steps[0] == 0 and steps[-1] == 1200
    assert np.all(np.diff(steps) > 0)
    later = steps[steps >= 20]  # below 20 steps integer steps cannot be 8% apart
    assert np.max(later[1:] / later[:-1]) <= 1.1


def test_attention_only_patterns_and_fused_attention_agree():
    torch.manual_seed(0)
    model = AttentionOnly(AttentionOnlyConfig(vocab_size=11, context=12, d_model=16, n_layer=2, n_head=2)).eval()
    idx = torch.randint(0, 11, (3, 12))
    fused, none, _ = model(idx)
    explicit, patterns, _ = model(idx, patterns=True)
    assert none == [] and len(patterns) == 2
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(patterns[0].sum(-1), torch.ones(3, 2, 12))
    assert torch.all(patterns[1].triu(1) == 0)


def test_the_config_catches_probes_at_training_periods_and_bands_outside_the_context(config, repo):
    import copy

    from tinylens.config import ConfigError, validate_config

    schema = repo / "config/schema.yaml"
    validate_config(config, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["small"]["phase_change"]["probes"]["probe_periods"] = [7, 29]
    with pytest.raises(ConfigError, match=r"presets\.small\.phase_change\.probes\.probe_periods' \(run main\): 7 is "
                                          r"aliased with the training periods 12-24"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["small"]["phase_change"]["probes"]["early_band"] = [4, 11]
    with pytest.raises(ConfigError, match=r"presets\.small\.phase_change\.probes\.early_band' \(\[4, 11\]\) and "
                                          r"single_positions' early position \(6\) must end by position 10"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["small"]["phase_change"]["verdict"]["rule"] = ["prefix_matching", "ablaton"]
    with pytest.raises(ConfigError, match=r"verdict\.rule' names unknown tests \['ablaton'\]"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["phase_change"]["probes"]["late_band"] = [16, 24]
    with pytest.raises(ConfigError, match=r"presets\.test\.phase_change\.probes\.early_band/late_band"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["phase_change"]["reference"] = "nope"
    with pytest.raises(ConfigError, match=r"phase_change\.reference' \('nope'\) must name one of"):
        validate_config(bad, schema)


# --- figures, on hand-built runs --------------------------------------------------------------------

def figure_run(detected: bool, width: int = 64):
    """One seed's curves, its best head's curves and its entry of the metrics."""
    curves = hand_built(300.0)
    n = len(curves["step"])
    curves.update(val_loss=np.linspace(3.5, 2.5, n), icl=np.full(n, 0.05), icl_se=np.full(n, 0.01),
                  icl_single=np.full(n, 0.1), icl_single_se=np.full(n, 0.04),
                  energy=np.linspace(1.2, 1.5, n), kl_unigram=np.linspace(0.1, 1.0, n),
                  loss_by_position=np.tile(np.linspace(3, 2, 8), (n, 1)),
                  mixture_loss_by_position=np.tile(np.linspace(3, 1, 8), (n, 1)))
    pm = curves["prefix_matching"]
    heads = {"prefix_matching": {25: pm, 29: pm * 0.9}, "prefix_matching_se": {25: pm * 0 + 0.01, 29: pm * 0 + 0.01},
             "prefix_matching_mean": pm * 0.95, "copying": curves["copying"], "previous_token_head": pm + 0.2,
             "k_composition": {"score": pm, "baseline_mean": pm * 0 + 0.1, "baseline_std": pm * 0 + 0.01}}
    summary = {"phase_change_detected": detected, "window": {"start": 250.0, "peak": 300, "end": 360.0,
                                                              "peak_tokens": 300 * 2048},
               "best_head": {"layer": 1, "head": 2, "probe_periods": [25, 29],
                             "uniform_prefix_matching": {"25": UNIFORM, "29": UNIFORM}},
               "previous_token_head": {"layer": 0, "head": 1, "uniform": 0.06},
               "nonconvex": {"stretches": [{"start": 250, "peak": 300, "end": 360}]},
               "seed_000_phases": {"phase_1": False, "phase_2": True, "phase_3": False}}
    return curves, heads, summary


def _run(seeds, width: int = 64, layers: int = 2):
    """A run's curves, heads and entry from per-seed figure_run outputs (seed -> (curves, heads, entry))."""
    entry = {"setting": {"layers": layers, "width": width, "schedule": "cosine", "data": "text"},
             "detected_seeds": sum(s[2]["phase_change_detected"] for s in seeds.values()), "seeds_run": len(seeds),
             "seeds": {k: v[2] for k, v in seeds.items()}}
    return {k: v[0] for k, v in seeds.items()}, {k: v[1] for k, v in seeds.items()}, entry


def test_curves_figure_shades_only_detected_windows():
    from tinylens.phase_change.plots import make_curves

    curves, heads, run = _run({"0": figure_run(True), "1": figure_run(False)})
    fig = make_curves(curves, heads, run, "main")
    loss, icl, prefix, copying, previous, composition = fig.axes
    assert len(loss.patches) == 1  # seed 1's window is not shaded
    (shade,) = loss.patches
    assert shade.get_x() == pytest.approx(250.0) and shade.get_x() + shade.get_width() == pytest.approx(360.0)
    labels = [x.get_label() for x in prefix.get_lines()]
    assert "seed 0: layer 2, head 3, period 29" in labels  # heads and layers from 1 in the figure
    np.testing.assert_allclose([x for x in prefix.get_lines() if x.get_label() == "seed 0: layer 2, head 3, period 29"][0]
                               .get_ydata(), heads["0"]["prefix_matching"][29])
    assert any(x.get_label() == "seed 0 (detected): training mixture" for x in loss.get_lines())
    assert any(x.get_label() == "seed 1 (not detected): training mixture" for x in loss.get_lines())
    assert [x.get_label() for x in previous.get_lines() if not x.get_label().startswith("_")] == \
        ["seed 0: layer 1, head 2", "seed 1: layer 1, head 2"]
    np.testing.assert_allclose(composition.get_lines()[0].get_ydata(), heads["0"]["k_composition"]["score"])


def test_controls_and_energy_figures_draw_every_run():
    from tinylens.phase_change.plots import make_controls, make_energy_kl, make_loss_derivative

    runs = {"a": _run({"0": figure_run(True), "1": figure_run(True)}), "b": _run({"0": figure_run(False, 32)}, 32)}
    curves = {k: v[0] for k, v in runs.items()}
    heads = {k: v[1] for k, v in runs.items()}
    entries = {k: v[2] for k, v in runs.items()}
    point = lambda run, value, score, peak: {  # noqa: E731
        "run": run, "value": value, "detected_seeds": 1, "seeds_run": 2,
        "final_prefix_matching": {"mean": score, "se": 0.01}, "peak_tokens": {"mean": peak, "se": 1000.0}}
    dose = [point("half", 0.5, 0.2, None), point("a", 1.0, 0.4, 600_000)]
    width = [point("b", 32, 0.1, None), point("a", 64, 0.4, 600_000)]
    fig = make_controls(curves, heads, entries, dose, width)
    prefix, icl, dose_ax, width_ax = fig.axes[:4]
    assert len(prefix.get_lines()) == 3 + 2  # three seeds and the two detected seeds' peak markers
    np.testing.assert_allclose(prefix.get_lines()[0].get_xdata(), curves["a"]["0"]["tokens"])
    (score,) = [c for c in dose_ax.containers]
    np.testing.assert_allclose(score.lines[0].get_ydata(), [0.2, 0.4])
    twin = fig.axes[4]  # the dose panel's peak tokens: only where a seed detected
    np.testing.assert_allclose(np.asarray(twin.containers[0].lines[0].get_xdata(), dtype=float), [1.0])
    energy, kl = make_energy_kl(curves, entries).axes
    assert [x.get_label() for x in energy.get_lines()] == [
        "a seed 0 (d_model 64): phases [2]", "a seed 1 (d_model 64): phases [2]", "b seed 0 (d_model 32): phases [2]"]
    mixture, natural = make_loss_derivative(curves["a"]["0"], entries["a"]["seeds"]["0"], "a", 0.1).axes[:2]
    assert mixture.get_title().startswith("a, training mixture") and natural.get_title().startswith("a, natural text")
    derivative = mixture.collections[0].get_array().reshape(len(curves["a"]["0"]["step"]), 8)
    assert np.all(derivative[:, 1:] < 0)  # the mixture's loss falls along the context


def _seed_entry(detected: bool, layers: int, prefix: float) -> dict:
    band = {"start": 0.4, "end": 0.41, "change": 0.01, "change_se": 0.05, "moves": "no change"}
    single = {"start": 0.5, "end": 0.3, "change": -0.2, "change_se": 0.05, "moves": "falls"}
    tests = {"ablation": {"best_raise": 1.5, "best_z": 12.0, "control_raise": 0.01, "control_z": 0.5,
                          "difference_z": 10.0, "pass": True},
             "previous_token_head": {"window": {"start": 100.0, "peak": 150, "end": 250.0}, "pass": True},
             "k_composition": {"start": 0.1, "end": 0.3, "rise": 0.2, "baseline_mean": 0.08, "baseline_std": 0.01,
                               "z": 20.0, "other_pairs_rise_median": 0.01, "pass": True},
             "k_composition_above_random": {"end": 0.3, "baseline_mean": 0.08, "baseline_std": 0.01, "z": 22.0,
                                            "pass": True}}
    return {"phase_change_detected": detected, "tests": tests,
            "window": {"start": 300.0, "peak": 400, "end": 600.0, "peak_tokens": 819200, "located_within": 0.12},
            "best_head": {"layer": layers - 1, "head": 2, "probe_periods": [25, 29], "control_head": 0,
                          "final_prefix_matching": {"25": prefix, "29": prefix},
                          "uniform_prefix_matching": {"25": 0.03, "29": 0.03}},
            "previous_token_head": {"layer": 0, "head": 1, "final": 0.8, "uniform": 0.06},
            "natural_icl_across_window": {"band": band, "single_position": single},
            "nonconvex": {"count": 1}, "seed_000_phases": {"phase_3": False}}


def _summary_document(detected: bool) -> dict:
    """A two-run metrics/phase_change.json: the reference (two seeds) and a 1-layer control (never detected)."""
    def run(layers, found, prefix):
        seeds = {"0": _seed_entry(found, layers, prefix), "1": _seed_entry(found, layers, prefix)}
        n = 2 if found else 0
        return {"setting": {"layers": layers, "width": 64, "heads": 4, "context": 64, "lr": 0.003, "steps": 1000,
                            "schedule": "cosine", "data": "text, 100% repeated"},
                "detected_seeds": n, "seeds_run": 2, "seeds": seeds,
                "peak_tokens": {"mean": 819200.0, "se": 20000.0, "n": 2} if found else {"mean": None, "se": None, "n": 0},
                "final_prefix_matching": {"mean": prefix, "se": 0.01, "n": 2}, "uniform_prefix_matching": 0.03,
                "nonconvex_stretches": [1, 1], "one_stretch_inside_window": n}
    runs = {"main": run(2, detected, 0.3 if detected else 0.08), "one_layer": run(1, False, 0.035)}
    point = lambda name: {"value": 1.0, "final_prefix_matching": runs[name]["final_prefix_matching"],  # noqa: E731
                          "peak_tokens": runs[name]["peak_tokens"], "seeds_run": 2, "natural_icl_falls_in": 0,
                          "detected_seeds": runs[name]["detected_seeds"],
                          "natural_icl_band_change": {"mean": 0.01, "se": 0.02, "n": 2}}
    return {"runs": runs, "reference": "main", "detect": {"z": 3.0},
            "detected": {n: f"{r['detected_seeds']} of 2" for n, r in runs.items()},
            "verdict_rule": {"rule": ["prefix_matching", "ablation"], "descriptive": ["copying", "k_composition",
                                                                                  "rise_in_window"],
                             "rule_tests_never_failing": [], "descriptive_tests_failing": ["k_composition"],
                             "fails_in_controls": {"prefix_matching": ["one_layer/0"], "ablation": ["one_layer/0"],
                                                   "copying": [], "k_composition": [], "rise_in_window": ["one_layer/1"]},
                             "fails_in_reference": {"copying": [], "k_composition": ["main/1"], "rise_in_window": []}},
            "dose": [point("main")], "width": [point("main")],
            "icl_search": {"head_forms_and_natural_icl_falls": []},
            "second_dataset": {"runs": {}, "reference_peak_tokens": runs["main"]["peak_tokens"]},
            "sensitivity": [{"min_rise": 0.1, "z": 3.0, "detected_seeds": {"main": 2 if detected else 0, "one_layer": 0}},
                            {"min_rise": 0.05, "z": 2.0, "detected_seeds": {"main": 2 if detected else 1, "one_layer": 1}}],
            "seed_000_phase_3_in": []}


def test_findings_wording_follows_the_detection():
    from tinylens.phase_change.summary import findings

    found = " ".join(findings({"phase_change": _summary_document(True)}))
    assert "detects a phase change in main: 2 of 2 seeds; one_layer: 0 of 2 seeds." in found
    assert "the window's peak lies at 819,200 +- 20,000 tokens (n = 2)" in found
    assert "the best head (layer 2, head 3) ends at 0.3 at period 25 (uniform 0.03)" in found  # from 1 in words
    assert "zeroing that head raises the second copy's loss by 1.5 nats (z = 12), zeroing head 1 of its layer" in found
    assert "1 layer (one_layer): 0 of 2 seeds, best head 0.035 (uniform 0.03)" in found
    assert ("Descriptive: copying (pass in every control seed); rise in window (fails in 1 control seeds); "
            "k composition (fails in 1 of 2 reference seeds).") in found
    assert "the reference is detected in 2 of 2 seeds; one_layer in 0 to 1." in found
    assert "Olsson et al.'s single-position form falls (-0.2 +- 0.05)" in found
    assert "In none of the repeated fractions run (1) does the head form" in found
    missing = " ".join(findings({"phase_change": _summary_document(False)}))
    assert "main: 0 of 2 seeds" in missing and "the window's peak lies at none" in missing
