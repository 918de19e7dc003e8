"""The phase-change family (method.md §8b): detection on hand-built curves, the ICL estimator, the
data mixture and probes, the attention-only model."""

import numpy as np
import pytest
import torch

from tinylens.dynamics.icl import icl_score, single_position_score
from tinylens.phase_change.data import MixtureSettings, check_probe_periods, mixture_windows
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
    test = verdict["tests"]["prefix_matching"]
    assert test["share_of_rise_in_window"] < SETTINGS.min_share or test["window_decades"] > SETTINGS.max_decades
    assert not verdict["phase_change_detected"]


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


def test_probe_periods_must_differ_from_the_training_periods():
    mixture = MixtureSettings(repeat_fraction=0.5, period_min=12, period_max=24)
    check_probe_periods([7, 29], mixture, 64)
    with pytest.raises(ValueError, match="probe_periods: 16 lies among the training periods"):
        check_probe_periods([7, 16], mixture, 64)
    check_probe_periods([16], MixtureSettings(0.0, 12, 24), 64)  # plain text repeats at no period


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
    bad["presets"]["small"]["phase_change"]["probes"]["probe_periods"] = [7, 20]
    with pytest.raises(ConfigError, match=r"presets\.small\.phase_change\.probes\.probe_periods': 20 lies among"):
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
    curves = hand_built(300.0)
    n = len(curves["step"])
    curves.update(val_loss=np.linspace(3.5, 2.5, n), icl=np.full(n, 0.05), icl_se=np.full(n, 0.01),
                  energy=np.linspace(1.2, 1.5, n), kl_unigram=np.linspace(0.1, 1.0, n),
                  loss_by_position=np.tile(np.linspace(3, 2, 8), (n, 1)),
                  mixture_loss_by_position=np.tile(np.linspace(3, 1, 8), (n, 1)))
    heads = {k: curves[k] for k in ("prefix_matching", "prefix_matching_se", "copying")}
    summary = {"phase_change_detected": detected, "window": {"start": 250.0, "peak": 300, "end": 360.0,
                                                              "peak_tokens": 300 * 2048},
               "best_head": {"layer": 1, "head": 2, "uniform_prefix_matching": UNIFORM},
               "setting": {"layers": 2, "width": width, "schedule": "cosine", "mixture": {"repeat_fraction": 1.0}},
               "seed_000_phases": {"phase_1": False, "phase_2": True, "phase_3": False}}
    return curves, heads, summary


def test_curves_figure_shades_only_detected_windows():
    from tinylens.phase_change.plots import make_curves

    (c0, h0, s0), (c1, h1, s1) = figure_run(True), figure_run(False)
    fig = make_curves({"a": c0, "b": c1}, {"a": h0, "b": h1}, {"a": s0, "b": s1})
    loss, icl, prefix, copying = fig.axes
    assert len(loss.patches) == 1  # run b's window is not shaded
    (shade,) = loss.patches
    assert shade.get_x() == pytest.approx(250.0) and shade.get_x() + shade.get_width() == pytest.approx(360.0)
    labels = [x.get_label() for x in prefix.get_lines()]
    assert "a: best head L1H2" in labels
    np.testing.assert_allclose([x for x in prefix.get_lines() if x.get_label() == "a: best head L1H2"][0].get_ydata(),
                               h0["prefix_matching"])
    assert any(x.get_label() == "a (detected): training mixture" for x in loss.get_lines())
    assert any(x.get_label() == "b (not detected): training mixture" for x in loss.get_lines())


def test_controls_and_energy_figures_draw_every_run():
    from tinylens.phase_change.plots import make_controls, make_energy_kl, make_loss_derivative

    runs = {"a": figure_run(True), "b": figure_run(False, width=32)}
    curves = {k: v[0] for k, v in runs.items()}
    heads = {k: v[1] for k, v in runs.items()}
    summaries = {k: v[2] for k, v in runs.items()}
    prefix, icl = make_controls(curves, heads, summaries).axes
    assert len(prefix.get_lines()) == 3  # two runs and one peak marker (only a's phase change is detected)
    np.testing.assert_allclose(prefix.get_lines()[0].get_xdata(), curves["a"]["tokens"])
    energy, kl = make_energy_kl(curves, summaries).axes
    assert [x.get_label() for x in energy.get_lines()] == ["a (d_model 64): phases [2]", "b (d_model 32): phases [2]"]
    mixture, natural = make_loss_derivative(curves["a"], summaries["a"], "a", 0.1).axes[:2]
    assert mixture.get_title().startswith("a, training mixture") and natural.get_title().startswith("a, natural text")
    derivative = mixture.collections[0].get_array().reshape(len(curves["a"]["step"]), 8)
    assert np.all(derivative[:, 1:] < 0)  # the mixture's loss falls along the context


def _summary_document(detected: bool) -> dict:
    """A two-run metrics/phase_change.json: the reference and a 1-layer control (never detected)."""
    def run(layers, found, prefix):
        return {"setting": {"layers": layers, "width": 64, "heads": 4, "context": 64, "lr": 0.003, "steps": 1000,
                            "schedule": "cosine", "data": "text, 100% repeated", "seed": 0},
                "phase_change_detected": found,
                "window": {"start": 300.0, "peak": 400, "end": 600.0, "peak_tokens": 819200},
                "best_head": {"layer": layers - 1, "head": 2, "probe_periods": [7, 29], "final_prefix_matching": prefix,
                              "final_prefix_matching_se": 0.01, "uniform_prefix_matching": 0.07,
                              "final_copying": 0.9},
                "loss_bump": {"z": 40.0},
                "natural_icl_across_window": {"start": 0.4, "end": 0.41, "change": 0.01, "change_se": 0.05}}
    runs = {"main": run(2, detected, 0.3 if detected else 0.08), "one_layer": run(1, False, 0.075)}
    return {"runs": runs, "detected": ["main"] if detected else [],
            "controls": {"reference": "main", "runs": {n: {"phase_change_detected": r["phase_change_detected"],
                                                          "peak_tokens_over_reference": None}
                                                      for n, r in runs.items()}},
            "seed_000_phase_3_in": []}


def test_findings_wording_follows_the_detection():
    from tinylens.phase_change.summary import findings

    found = " ".join(findings({"phase_change": _summary_document(True)}))
    assert "detected by code in 1 of 2 runs (main)" in found
    assert "induction heads form between steps 300 and 600" in found and "prefix-matching score of 0.3 +- 0.01" in found
    assert "1 layer (one_layer): none detected (best prefix matching 0.075 against 0.07)" in found
    assert "no change beyond two standard errors" in found and "appears in none of the runs (widths 64)" in found
    missing = " ".join(findings({"phase_change": _summary_document(False)}))
    assert "detected by code in 0 of 2 runs." in missing and "induction heads form" not in missing
    assert "No phase change is detected in the 2-layer, width-64 reference run (main)" in missing
