"""Suites a researcher can trust (method.md §8b, §13): the integrity gate on hand-made digests, the alias-free
probe periods, and the onset's per-period test on hand-built curves. The built suites through the rules are in
tests/test_external.py."""

import numpy as np
import pytest
import torch

from tinylens.phase_change.detect import DetectSettings, detect, uniform_prefix_matching
from tinylens.phase_change.integrity import integrity_report, warning_text, weights_digest
from tinylens.phase_change.onset import check_probe_periods, detect_onset, lookback_aliases, probe_period_problems
from tinylens.phase_change.run import checkpoint_steps

SETTINGS = DetectSettings(smooth_decades=0.05, z=3.0, min_rise=0.1, min_share=0.5, max_decades=0.5, min_swing=0.1)


def test_the_report_names_every_step_that_repeats_weights_and_never_the_final_one():
    steps = [0, 1, 2, 4, 8, 16]
    digests = ["a", "a", "b", "f", "b", "f"]  # 1 repeats 0; 4 holds the final weights; 8 repeats 2, not adjacent
    report = integrity_report(steps, digests)
    assert report["repeats_previous"] == [{"step": 1, "same_as": 0}]
    assert report["identical_to_final"] == [{"step": 4, "final_step": 16}]
    assert report["repeats_earlier"] == [{"step": 8, "same_as": 2}]
    assert report["left_out"] == report["flagged"] == [1, 4, 8]
    assert report["detection_steps"] == [0, 2, 16] and report["distinct_weights"] == 3
    kept = integrity_report(steps, digests, keep=True)
    assert kept["flagged"] == [1, 4, 8] and kept["left_out"] == [] and kept["detection_steps"] == steps
    assert "They are kept in phase and window detection" in warning_text(kept, "suite")
    assert "left out of phase and window detection" in warning_text(report, "suite")
    # the last checkpoints all final weights: the intermediate ones are flagged, the final one kept
    tail = integrity_report([0, 1, 2, 3], ["x", "y", "f", "f"])
    assert tail["identical_to_final"] == [{"step": 2, "final_step": 3}] and tail["detection_steps"] == [0, 1, 3]
    clean = integrity_report([0, 1, 2], ["x", "y", "z"])
    assert clean["flagged"] == [] and warning_text(clean, "suite") is None
    with pytest.raises(ValueError, match="must increase strictly"):
        integrity_report([0, 2, 1], ["x", "y", "z"])


def test_the_digest_is_of_the_weights_as_loaded():
    state = {"b": torch.arange(6, dtype=torch.float32).reshape(2, 3), "a": torch.ones(4, dtype=torch.bfloat16)}
    same = {"a": state["a"].clone(), "b": state["b"].clone()}
    assert weights_digest(state) == weights_digest(same)  # the same tensors, whatever the dict's order
    nudged = {**same, "b": same["b"].clone()}
    nudged["b"][1, 2] = torch.nextafter(nudged["b"][1, 2], torch.tensor(10.0))
    assert weights_digest(nudged) != weights_digest(state)  # one value, one ulp
    assert weights_digest({**same, "b": same["b"].double()}) != weights_digest(state)  # the same values in float64
    assert weights_digest({**same, "b": same["b"].view(torch.int32)}) != weights_digest(state)  # the same bytes
    assert weights_digest({**same, "b": same["b"].reshape(3, 2)}) != weights_digest(state)
    assert weights_digest({"c": same["b"], "a": same["a"]}) != weights_digest(state)


def test_probe_periods_must_be_alias_free():
    # the §8b `small` preset's probes (7, 29) against its training periods (12-24): 7 x 2 = 14 and 7 x 3 = 21 are
    # training periods, so a head looking back 13 or 20 positions would score like an induction head at period 7
    assert lookback_aliases(7, 64, (12, 24)) == [14, 21]
    assert lookback_aliases(29, 64, (12, 24)) == [] and lookback_aliases(7, 64, None) == []
    with pytest.raises(ValueError, match=r"'onset\.probe_periods': 7 is not alias-free: its multiple\(s\) \[14, 21\] "
                                         r"lie among 'onset\.lookback_periods' \[12, 24\]"):
        check_probe_periods([7, 29], 64, (12, 24), "onset")
    check_probe_periods([25, 29], 64, (12, 24), "onset")
    check_probe_periods([7, 11, 29], 512, (2, 4), "onset")  # Pythia's: no multiple of 7, 11, 29 is 2-4
    assert len(probe_period_problems([3, 29], 64, (2, 4), "onset")) == 1  # 3 aliases a look-back of 2
    # one period, or periods a single look-back matches together (lcm 8 <= 64), or a period not repeated twice
    assert any("least common multiple (29)" in p for p in probe_period_problems([29], 64, None, "k"))
    assert any("least common multiple (8)" in p for p in probe_period_problems([4, 8], 64, None, "k"))
    assert any("33 does not repeat twice" in p for p in probe_period_problems([25, 33], 64, None, "k"))


def heads_table(rise: dict[int, float], at: float = 300.0, seed: int = 0):
    """Checkpoints log-spaced to 1,200; per probe period (7, 29; context 64) two heads: layer 0 stays at the
    uniform head's score, layer 1 rises by ``rise[period]`` at step ``at`` (a logistic 0.05 decades wide).
    Returns the curves of the other tests (all rising at ``at``) and the heads table's columns."""
    rng = np.random.default_rng(seed)
    steps = np.array(checkpoint_steps(10, 1.08, 1200))
    x = np.log10(np.maximum(steps, 1))
    jump = 1 / (1 + np.exp(-(x - np.log10(at)) / 0.05))
    columns = {k: [] for k in ("step", "layer", "head", "period", "prefix_matching", "prefix_matching_se", "copying")}
    for period, r in rise.items():
        u = uniform_prefix_matching(64, period)
        for layer in (0, 1):
            score = u + (r * jump if layer == 1 else 0) + 0.003 * rng.standard_normal(len(steps))
            columns["step"] += steps.tolist()
            columns["layer"] += [layer] * len(steps)
            columns["head"] += [0] * len(steps)
            columns["period"] += [period] * len(steps)
            columns["prefix_matching"] += score.tolist()
            columns["prefix_matching_se"] += [0.005] * len(steps)
            columns["copying"] += (-0.2 + jump * (layer == 1)).tolist()
    curves = {"step": steps, "tokens": steps * 2048,
              "copy_loss_drop": -1.5 * jump + 0.01 * rng.standard_normal(len(steps)),
              "copy_loss_drop_se": np.full(len(steps), 0.03),
              "icl": -0.8 * jump + 0.005 * rng.standard_normal(len(steps)), "icl_se": np.full(len(steps), 0.02),
              "loss": 4 - 0.6 * x + 0.005 * rng.standard_normal(len(steps))}
    return curves, {k: np.asarray(v) for k, v in columns.items()}


def test_the_best_head_must_pass_at_every_probe_period_on_its_own():
    curves, heads = heads_table({7: 0.6, 29: 0.6})
    verdict = detect_onset(curves, heads, 64, SETTINGS)
    assert verdict["phase_change_detected"]
    assert (verdict["best_head"]["layer"], verdict["best_head"]["head"]) == (1, 0)
    assert verdict["window"]["start"] < 300 < verdict["window"]["end"]
    assert set(verdict["tests"]["prefix_matching"]["per_period"]) == {"7", "29"}
    # a head that rises at period 7 only (a fixed look-back whose distance + 1 is a multiple of 7): its mean over
    # the periods clears the uniform head's by 0.45, which the mean-over-periods test would take for induction
    curves, heads = heads_table({7: 0.9, 29: 0.0})
    mean_only = detect_onset(curves, heads, 64, SETTINGS)
    per_period = mean_only["tests"]["prefix_matching"]["per_period"]
    assert per_period["7"]["pass"] and not per_period["29"]["pass"]
    assert not mean_only["tests"]["prefix_matching"]["pass"] and not mean_only["phase_change_detected"]
    best = (heads["layer"] == 1)
    mean = np.mean([heads["prefix_matching"][best & (heads["period"] == p)] for p in (7, 29)], axis=0)
    se = np.full(len(curves["step"]), 0.005 / np.sqrt(2))
    uniform = np.mean([uniform_prefix_matching(64, p) for p in (7, 29)])
    copying = heads["copying"][best & (heads["period"] == 7)]
    assert detect({"step": curves["step"], "tokens": curves["tokens"], "prefix_matching": mean,
                   "prefix_matching_se": se, "copying": copying, "copy_loss_drop": curves["copy_loss_drop"],
                   "copy_loss_drop_se": curves["copy_loss_drop_se"], "mixture_icl": curves["icl"],
                   "mixture_icl_se": curves["icl_se"], "mixture_loss": curves["loss"]},
                  uniform, SETTINGS)["phase_change_detected"]  # what the mean over periods would have said
