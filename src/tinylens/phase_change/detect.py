"""Curves of one run -> its phase change, found by code with statistics (method.md §8b).

The window is the dynamics family's (:func:`tinylens.dynamics.phases.phase_change_window`): where
the best head's prefix-matching score rises and the ICL score falls fastest in log-step. A phase
change is *detected* only when, at the window's end (the first checkpoint at or after it), each of
these holds as a one-sided z-test at ``z`` standard errors, and the window is not at the very
start of training:

- prefix matching: the best head's score exceeds the uniform head's by more than ``min_rise`` and
  by ``z`` standard errors (over the probe sequences), and at least ``min_share`` of its whole rise
  (step 0 to the end of training) happens inside the window (a jump, not a slow drift);
- copying: the best head's OV circuit copies (eigenvalue score above 0; weights only, no noise);
- the second copy of the repeated random sequences is predicted better than the first: the mean
  per-sequence drop is below 0 by ``z`` standard errors;
- the ICL score on the training distribution is below 0 by ``z`` standard errors.

The loss bump (Olsson et al.'s non-convexity) is tested separately against the curve's noise: the
smoothed held-out loss minus its lower convex envelope in log-step, largest inside the window, in
units of the noise (the robust standard deviation of the raw loss about the smoothed curve).

>>> import numpy as np
>>> steps = np.array([0, 10, 20, 40, 80, 160, 320])
>>> lower_convex_envelope(np.log10(steps[1:]), np.array([3.0, 2.5, 2.6, 2.0, 1.9, 1.8])).round(2).tolist()
[3.0, 2.5, 2.25, 2.0, 1.9, 1.8]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinylens.dynamics.phases import phase_change_window, smooth


@dataclass(frozen=True)
class DetectSettings:
    """Thresholds of the detection (config ``phase_change.detect``): ``smooth_decades`` of the
    curves in log-step, ``z`` the one-sided test's standard errors, ``min_rise`` the best head's
    prefix matching above uniform, ``min_share`` of its rise inside the window, which spans at most
    ``max_decades`` in log-step, ``min_swing`` for seed 000's phases."""

    smooth_decades: float
    z: float
    min_rise: float
    min_share: float
    max_decades: float
    min_swing: float


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


def loss_bump_test(steps: np.ndarray, loss: np.ndarray, start: float, end: float, width: float, z: float) -> dict:
    """How far the smoothed loss rises above its lower convex envelope inside [start, end], against
    the noise of the raw loss about the smoothed one (1.4826 x median absolute deviation)."""
    steps, loss = np.asarray(steps, float), np.asarray(loss, float)
    keep = steps > 0
    x, y = np.log10(steps[keep]), loss[keep]
    s = smooth(x, y, width)
    excess = s - lower_convex_envelope(x, s)
    noise = float(1.4826 * np.median(np.abs(y - s)))
    inside = (x >= np.log10(start)) & (x <= np.log10(end))
    height = float(excess[inside].max()) if inside.any() else 0.0
    z_bump = height / noise if noise > 0 else (np.inf if height > 0 else 0.0)
    return {"height": height, "noise": noise, "z": float(z_bump), "bump": bool(z_bump > z)}


def _at_or_after(steps: np.ndarray, step: float) -> int:
    later = np.flatnonzero(steps >= step - 1e-9)
    return int(later[0]) if len(later) else len(steps) - 1


def _at_or_before(steps: np.ndarray, step: float) -> int:
    earlier = np.flatnonzero(steps <= step + 1e-9)
    return int(earlier[-1]) if len(earlier) else 0


def detect(curves: dict[str, np.ndarray], uniform: float, settings: DetectSettings) -> dict:
    """The verdict of one run.

    curves: ``step``, ``tokens``, ``prefix_matching`` and ``prefix_matching_se`` (the best head's,
    mean over probe periods), ``copying`` (the best head's), ``copy_loss_drop`` and its ``_se``,
    ``mixture_icl`` and its ``_se``, ``mixture_loss``, arrays over checkpoints; uniform: the
    uniform head's prefix-matching score on the same probes.
    """
    c = {k: np.asarray(v, dtype=np.float64) for k, v in curves.items()}
    steps, z = c["step"], settings.z
    window = phase_change_window(steps, c["prefix_matching"], c["mixture_icl"], settings.smooth_decades)
    i0, i1 = _at_or_before(steps, window["start"]), _at_or_after(steps, window["end"])
    pm, pm_se = c["prefix_matching"], c["prefix_matching_se"]
    whole_rise = float(pm[i1:].max() - pm[0])
    in_window = float(pm[i1] - pm[i0])
    share = in_window / whole_rise if whole_rise > 0 else 0.0
    above = float(pm[i1] - uniform)
    decades = float(np.log10(window["end"] / window["start"]))
    tests = {
        "prefix_matching": {
            "start": float(pm[i0]), "end": float(pm[i1]), "uniform": uniform, "above_uniform": above,
            "z": above / max(pm_se[i1], 1e-12), "share_of_rise_in_window": share, "window_decades": decades,
            "pass": bool(above > settings.min_rise and above > z * pm_se[i1] and share >= settings.min_share
                         and decades <= settings.max_decades),
        },
        "copying": {"start": float(c["copying"][i0]), "end": float(c["copying"][i1]),
                    "pass": bool(c["copying"][i1] > 0)},
    }
    for name, key in (("second_copy_loss_drop", "copy_loss_drop"), ("icl_training_distribution", "mixture_icl")):
        v, se = c[key], c[f"{key}_se"]
        tests[name] = {"start": float(v[i0]), "end": float(v[i1]), "end_se": float(se[i1]),
                       "z": float(v[i1] / max(se[i1], 1e-12)), "pass": bool(v[i1] < -z * se[i1])}
    not_at_start = bool(window["start"] > steps[steps > 0][0])
    detected = not_at_start and all(t["pass"] for t in tests.values())
    bump = loss_bump_test(steps, c["mixture_loss"], window["start"], window["end"], settings.smooth_decades, z)
    tokens_per_step = float(c["tokens"][-1] / steps[-1])
    return {
        "phase_change_detected": bool(detected),
        "window": {**{k: window[k] for k in ("start", "peak", "end")},
                   **{f"{k}_tokens": round(window[k] * tokens_per_step) for k in ("start", "peak", "end")},
                   "located_within": float(steps[i1] / steps[max(i1 - 1, 0)] - 1) if i1 > 0 else None,
                   "after_first_checkpoint": not_at_start},
        "tests": tests,
        "loss_bump": bump,
        "z": z,
    }


def uniform_prefix_matching(context: int, period: int) -> float:
    """The prefix-matching score of a head attending uniformly to every position up to its own, on
    sequences repeated at ``period`` over ``context`` positions: a query at position i >= period has
    floor(i / period) matching keys among its i + 1.

    >>> round(uniform_prefix_matching(4, 2), 4)  # queries 2, 3: 1/3 and 1/4
    0.2917
    """
    i = np.arange(period, context)
    return float(np.mean((i // period) / (i + 1)))
