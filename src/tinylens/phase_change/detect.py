"""Curves of one run -> its phase change, found by code with statistics (method.md §8b).

Plain functions on arrays, so that any checkpoint suite can be judged the same way (our §8b runs, an
external model's checkpoints):

- **alias-free probe periods** (:func:`lookback_periods`, :func:`aliases`): a head that learnt to look a
  fixed distance d back scores like an induction head on probes repeating at a period p whenever a multiple
  of p equals d + 1. Windows repeated at a period P teach a fixed look-back of any multiple of P (minus
  one), so a probe period is aliased when one of its multiples below the context is a multiple of a
  training period below the context. And the probe periods' least common multiple must reach the context,
  so no single look-back fits every period (:func:`common_lookback`).
- **the window** (the dynamics family's, :func:`tinylens.dynamics.phases.phase_change_window`): where the
  best head's prefix-matching score (averaged over the probe periods) rises and the ICL score on the
  training distribution falls fastest in log-step.
- **the tests** (:func:`detect`), each a one-sided z-test at ``z`` standard errors at the window's end (the
  first checkpoint at or after it), each reported with its statistic and ``pass``:

  - ``prefix_matching``: at *every* probe period on its own, the best head's score exceeds the uniform
    head's by more than ``min_rise`` and by ``z`` standard errors (over the probe sequences);
  - ``rise_in_window``: at every period, at least ``min_share`` of the score's whole rise (step 0 to the end
    of training) happens inside the window (a jump, not a slow drift);
  - ``window_width``: the window spans at most ``max_decades``; ``after_first_checkpoint``: it does not start
    at the first checkpoint;
  - ``copying``: the best head's OV circuit copies (eigenvalue score above 0);
  - ``second_copy_loss_drop``: the second copy of the repeated random sequences is predicted better than
    the first (mean per-sequence drop below 0);
  - ``icl_training_distribution``: the ICL score on the training distribution is below 0.

  The mechanism's tests (:func:`ablation_test`, :func:`previous_token_test`, :func:`composition_tests`)
  take what a run measured besides the curves. Which tests make the verdict is the caller's rule
  (:func:`verdict`); the others are descriptive.
- **the loss's non-convexity** (Olsson et al.'s bump): the smoothed loss minus its lower convex envelope in
  log-step, against the noise of the raw loss about the smoothed one (:func:`loss_bump_test` inside the
  window, :func:`nonconvex_stretches` over the whole run).

>>> import numpy as np
>>> steps = np.array([0, 10, 20, 40, 80, 160, 320])
>>> lower_convex_envelope(np.log10(steps[1:]), np.array([3.0, 2.5, 2.6, 2.0, 1.9, 1.8])).round(2).tolist()
[3.0, 2.5, 2.25, 2.0, 1.9, 1.8]
>>> aliases(7, 64, lookback_periods(12, 24, 64))  # look-backs of 13, 20, 27, ... (periods 14, 21, 28, ...) score at 7
[14, 21, 28, 42, 56, 63]
>>> aliases(29, 64, lookback_periods(12, 24, 64))
[]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tinylens.dynamics.phases import phase_change_window, smooth


@dataclass(frozen=True)
class DetectSettings:
    """Thresholds of the detection (config ``phase_change.detect``): ``smooth_decades`` of the
    curves in log-step, ``z`` the one-sided test's standard errors, ``min_rise`` the best head's
    prefix matching above uniform, ``min_share`` of its rise inside the window, which spans at most
    ``max_decades`` in log-step, ``min_swing`` for seed 000's phases, ``previous_min_rise`` the
    previous-token head's score above uniform (its own threshold: the sensitivity table moves ``min_rise``
    alone)."""

    smooth_decades: float
    z: float
    min_rise: float
    min_share: float
    max_decades: float
    min_swing: float
    previous_min_rise: float = 0.1

    def but(self, **changes) -> DetectSettings:
        """The same settings with ``changes`` (the sensitivity table)."""
        return replace(self, **changes)


# --- alias-free probe periods -------------------------------------------------------------------------


def lookback_periods(period_min: int, period_max: int, context: int) -> list[int]:
    """Every look-back period (a fixed look-back distance + 1) that windows repeated at ``period_min`` ..
    ``period_max`` reward within ``context`` positions: each training period and its multiples below the
    context (a copy ``k`` periods back predicts as well as one period back).

    >>> lookback_periods(5, 6, 20)
    [5, 6, 10, 12, 15, 18]
    """
    return sorted({m for p in range(period_min, period_max + 1) for m in range(p, context, p)})


def aliases(period: int, context: int, lookbacks: Iterable[int]) -> list[int]:
    """The multiples of a probe ``period`` below ``context`` that lie among ``lookbacks``: the look-back
    periods at which a fixed-distance head would score at this probe period like an induction head."""
    lookbacks = set(lookbacks)
    return [m for m in range(period, context, period) if m in lookbacks]


def common_lookback(periods: Sequence[int], context: int) -> int | None:
    """The least common multiple of the probe periods when it lies below ``context`` (one fixed look-back,
    that multiple minus one, would match every period), else None."""
    lcm = math.lcm(*periods) if periods else 0
    return lcm if 0 < lcm < context else None


def uniform_prefix_matching(context: int, period: int) -> float:
    """The prefix-matching score of a head attending uniformly to every position up to its own, on
    sequences repeated at ``period`` over ``context`` positions: a query at position i >= period has
    floor(i / period) matching keys among its i + 1.

    >>> round(uniform_prefix_matching(4, 2), 4)  # queries 2, 3: 1/3 and 1/4
    0.2917
    """
    i = np.arange(period, context)
    return float(np.mean((i // period) / (i + 1)))


def uniform_previous_token(context: int) -> float:
    """The previous-token score (TransformerLens's "mul" form over every query) of a head attending
    uniformly to every position up to its own: query i >= 1 puts 1 / (i + 1) on i - 1, query 0 nothing.

    >>> round(uniform_previous_token(3), 4)  # (0 + 1/2 + 1/3) / 3
    0.2778
    """
    i = np.arange(1, context)
    return float(np.sum(1 / (i + 1)) / context)


# --- the loss's non-convexity -------------------------------------------------------------------------


def lower_convex_envelope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The greatest convex function below the points (x increasing), evaluated at x."""
    hull: list[int] = []
    for i in range(len(x)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b when it lies on or above the segment a -> i
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.interp(x, x[hull], y[hull])


def _excess(steps, loss, width: float) -> tuple[np.ndarray, np.ndarray, float]:
    """log10(step), the smoothed loss above its lower convex envelope, and the noise of the raw loss about the
    smoothed one (1.4826 x median absolute deviation), over the checkpoints after step 0."""
    steps, loss = np.asarray(steps, float), np.asarray(loss, float)
    keep = steps > 0
    x, y = np.log10(steps[keep]), loss[keep]
    s = smooth(x, y, width)
    return x, s - lower_convex_envelope(x, s), float(1.4826 * np.median(np.abs(y - s)))


def _in_noise(height: float, noise: float) -> float:
    return height / noise if noise > 0 else (np.inf if height > 0 else 0.0)


def loss_bump_test(steps: np.ndarray, loss: np.ndarray, start: float, end: float, width: float, z: float) -> dict:
    """How far the smoothed loss rises above its lower convex envelope inside [start, end], against
    the noise of the raw loss about the smoothed one (1.4826 x median absolute deviation)."""
    x, excess, noise = _excess(steps, loss, width)
    inside = (x >= np.log10(start)) & (x <= np.log10(end))
    height = float(excess[inside].max()) if inside.any() else 0.0
    z_bump = _in_noise(height, noise)
    return {"height": height, "noise": noise, "z": float(z_bump), "bump": bool(z_bump > z)}


def nonconvex_stretches(steps: np.ndarray, loss: np.ndarray, width: float, z: float) -> dict:
    """Every stretch of checkpoints where the smoothed loss lies above its lower convex envelope by more
    than ``z`` times the noise: ``stretches`` (first and last step, the step of the largest excess, its
    height and z), their ``count`` and the ``noise``. Source 004: the phase change's bump is the only
    place in training where the loss is not convex, so one stretch, inside the window."""
    x, excess, noise = _excess(steps, loss, width)
    above = excess > z * noise if noise > 0 else excess > 0
    out, i = [], 0
    while i < len(x):
        if not above[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(x) and above[j + 1]:
            j += 1
        k = i + int(np.argmax(excess[i : j + 1]))
        out.append({"start": int(round(10 ** x[i])), "end": int(round(10 ** x[j])), "peak": int(round(10 ** x[k])),
                    "height": float(excess[k]), "z": float(_in_noise(float(excess[k]), noise))})
        i = j + 1
    return {"count": len(out), "stretches": out, "noise": noise, "z": z}


# --- the window and the tests --------------------------------------------------------------------------


def _at_or_after(steps: np.ndarray, step: float) -> int:
    later = np.flatnonzero(steps >= step - 1e-9)
    return int(later[0]) if len(later) else len(steps) - 1


def _at_or_before(steps: np.ndarray, step: float) -> int:
    earlier = np.flatnonzero(steps <= step + 1e-9)
    return int(earlier[-1]) if len(earlier) else 0


def rise_window(steps: np.ndarray, values: np.ndarray, width: float) -> dict:
    """Where one curve rises fastest in log-step (the window of :func:`phase_change_window` with no second
    curve): ``start``, ``peak``, ``end`` in steps."""
    w = phase_change_window(steps, values, np.zeros(len(values)), width)
    return {k: w[k] for k in ("start", "peak", "end")}


def _per_period(values, se, uniform) -> tuple[dict, dict, dict]:
    """Per-period curves as dicts (a plain array and a plain uniform score: one period, key 0)."""
    if isinstance(values, Mapping):
        return ({int(p): np.asarray(v, np.float64) for p, v in values.items()},
                {int(p): np.asarray(v, np.float64) for p, v in se.items()},
                {int(p): float(u) for p, u in uniform.items()})
    return {0: np.asarray(values, np.float64)}, {0: np.asarray(se, np.float64)}, {0: float(uniform)}


def prefix_matching_tests(pm: Mapping[int, np.ndarray], pm_se: Mapping[int, np.ndarray], uniform: Mapping[int, float],
                          i0: int, i1: int, settings: DetectSettings) -> tuple[dict, dict]:
    """The best head's prefix matching at every probe period on its own, at checkpoint ``i1`` (the window's
    end; ``i0`` its start): above the uniform head's by more than ``min_rise`` and by ``z`` standard errors;
    and at least ``min_share`` of its whole rise inside the window. Returns the two tests."""
    above, share = {}, {}
    for p in sorted(pm):
        v, se = pm[p], pm_se[p]
        rise = float(v[i1] - uniform[p])
        whole = float(v[i1:].max() - v[0])
        inside = float(v[i1] - v[i0]) / whole if whole > 0 else 0.0
        above[str(p)] = {"start": float(v[i0]), "end": float(v[i1]), "end_se": float(se[i1]), "uniform": uniform[p],
                         "above_uniform": rise, "z": rise / max(float(se[i1]), 1e-12),
                         "pass": bool(rise > settings.min_rise and rise > settings.z * se[i1])}
        share[str(p)] = {"share_of_rise_in_window": inside, "pass": bool(inside >= settings.min_share)}
    return ({"per_period": above, "min_rise": settings.min_rise, "pass": all(t["pass"] for t in above.values())},
            {"per_period": share, "min_share": settings.min_share, "pass": all(t["pass"] for t in share.values())})


def detect(curves: Mapping[str, np.ndarray], uniform, settings: DetectSettings) -> dict:
    """The window and the curves' tests of one run (see the module's docstring).

    curves: ``step``, ``tokens``, ``prefix_matching`` and ``prefix_matching_se`` (the best head's: period ->
    ``[checkpoint]``, or one array), ``copying`` (the best head's), ``copy_loss_drop`` and its ``_se``,
    ``mixture_icl`` and its ``_se`` (the ICL score on the training distribution), ``mixture_loss``;
    uniform: the uniform head's prefix-matching score, period -> score (or one number). The window is
    located on the prefix matching averaged over the periods. ``phase_change_detected``: every test here
    passes (a caller with more tests applies its own rule, :func:`verdict`).
    """
    pm, pm_se, uniform = _per_period(curves["prefix_matching"], curves["prefix_matching_se"], uniform)
    c = {k: np.asarray(v, dtype=np.float64) for k, v in curves.items() if k not in ("prefix_matching", "prefix_matching_se")}
    steps, z = c["step"], settings.z
    mean_pm = np.mean([pm[p] for p in sorted(pm)], axis=0)
    window = phase_change_window(steps, mean_pm, c["mixture_icl"], settings.smooth_decades)
    i0, i1 = _at_or_before(steps, window["start"]), _at_or_after(steps, window["end"])
    decades = float(np.log10(window["end"] / window["start"]))
    above, share = prefix_matching_tests(pm, pm_se, uniform, i0, i1, settings)
    not_at_start = bool(window["start"] > steps[steps > 0][0])
    tests = {
        "prefix_matching": above,
        "rise_in_window": share,
        "window_width": {"decades": decades, "max_decades": settings.max_decades,
                         "pass": bool(decades <= settings.max_decades)},
        "after_first_checkpoint": {"start": float(window["start"]), "first_checkpoint": float(steps[steps > 0][0]),
                                   "pass": not_at_start},
        "copying": {"start": float(c["copying"][i0]), "end": float(c["copying"][i1]),
                    "pass": bool(c["copying"][i1] > 0)},
    }
    for name, key in (("second_copy_loss_drop", "copy_loss_drop"), ("icl_training_distribution", "mixture_icl")):
        v, se = c[key], c[f"{key}_se"]
        tests[name] = {"start": float(v[i0]), "end": float(v[i1]), "end_se": float(se[i1]),
                       "z": float(v[i1] / max(se[i1], 1e-12)), "pass": bool(v[i1] < -z * se[i1])}
    bump = loss_bump_test(steps, c["mixture_loss"], window["start"], window["end"], settings.smooth_decades, z)
    tokens_per_step = float(c["tokens"][-1] / steps[-1])
    return {
        "phase_change_detected": all(t["pass"] for t in tests.values()),
        "window": {**{k: window[k] for k in ("start", "peak", "end")},
                   **{f"{k}_tokens": round(window[k] * tokens_per_step) for k in ("start", "peak", "end")},
                   "located_within": float(steps[i1] / steps[max(i1 - 1, 0)] - 1) if i1 > 0 else None,
                   "after_first_checkpoint": not_at_start, "start_index": i0, "end_index": i1,
                   "tested_at_step": int(steps[i1])},
        "tests": tests,
        "loss_bump": bump,
        "z": z,
    }


# --- the mechanism's tests ------------------------------------------------------------------------------


def ablation_test(best: tuple[float, float], control: tuple[float, float] | None, z: float) -> dict:
    """Zeroing the best head's output raises the second-copy loss on the probes by more than ``z`` standard
    errors (``best``: the raise's mean and standard error over the probe sequences), and by ``z`` standard
    errors more than zeroing a control head of its layer does (``control``; the difference's standard error
    sqrt(se_best^2 + se_control^2), an upper bound for raises paired over the same sequences that correlate
    positively). None: the layer has no other head, the test cannot pass. ``control_raises_by_z``: the
    control's own raise clears z (zeroing any head of a trained layer moves the loss somewhat)."""
    b_z = best[0] / max(best[1], 1e-12)
    out = {"best_raise": best[0], "best_raise_se": best[1], "best_z": float(b_z)}
    if control is None:
        return {**out, "control_z": None, "pass": False}
    c_z = control[0] / max(control[1], 1e-12)
    diff_se = math.hypot(best[1], control[1])
    d_z = (best[0] - control[0]) / max(diff_se, 1e-12)
    return {**out, "control_raise": control[0], "control_raise_se": control[1], "control_z": float(c_z),
            "control_raises_by_z": bool(c_z > z), "difference": best[0] - control[0], "difference_se": diff_se,
            "difference_z": float(d_z), "pass": bool(b_z > z and d_z > z)}


def previous_token_test(steps: np.ndarray, score: np.ndarray, se: np.ndarray, uniform: float, window: Mapping,
                        settings: DetectSettings) -> dict:
    """A previous-token head forms in or before the induction window: at the window's end (the first
    checkpoint at or after it, where every test is read) its score exceeds a uniform head's by more than
    ``previous_min_rise`` and by ``z`` standard errors, and the peak of its own rise (:func:`rise_window`) is no later
    than that checkpoint. ``window``: :func:`detect`'s."""
    steps = np.asarray(steps, np.float64)
    i1 = _at_or_after(steps, window["end"])
    own = rise_window(steps, score, settings.smooth_decades)
    rise = float(score[i1] - uniform)
    formed = rise > settings.previous_min_rise and rise > settings.z * se[i1]
    in_time = own["peak"] <= steps[i1]
    return {"window": own, "end": float(score[i1]), "end_se": float(se[i1]), "uniform": uniform,
            "above_uniform": rise, "z": rise / max(float(se[i1]), 1e-12), "formed": bool(formed),
            "in_or_before_window": bool(in_time), "pass": bool(formed and in_time)}


def composition_tests(score: np.ndarray | None, baseline_mean: np.ndarray | None, baseline_std: np.ndarray | None,
                      window: Mapping, z: float) -> tuple[dict, dict]:
    """The K-composition score between the previous-token head and the induction head (method.md §9), in units
    of the standard deviation of the score between random heads (its baseline): ``k_composition``, it rises
    across the window by more than ``z`` of them; ``k_composition_above_random``, at the window's end it
    exceeds the random heads' mean by more than ``z`` of them. None: the heads are not in an earlier and a
    later layer (no composition), neither test can pass."""
    if score is None:
        reason = {"pass": False, "reason": "the two heads are not in an earlier and a later layer"}
        return dict(reason), dict(reason)
    i0, i1 = window["start_index"], window["end_index"]
    std = max(float(baseline_std[i1]), 1e-12)
    rise = float(score[i1] - score[i0])
    above = float(score[i1] - baseline_mean[i1])
    common = {"start": float(score[i0]), "end": float(score[i1]), "baseline_mean": float(baseline_mean[i1]),
              "baseline_std": float(baseline_std[i1])}
    return ({**common, "rise": rise, "z": rise / std, "pass": bool(rise / std > z)},
            {**common, "above_random": above, "z": above / std, "pass": bool(above / std > z)})


def verdict(tests: Mapping[str, Mapping], rule: Sequence[str]) -> bool:
    """Detected when every test the ``rule`` names passes."""
    missing = [t for t in rule if t not in tests]
    if missing:
        raise ValueError(f"phase_change.verdict.rule names tests {missing} that were not computed "
                         f"(tests: {sorted(tests)})")
    return all(bool(tests[t]["pass"]) for t in rule)
