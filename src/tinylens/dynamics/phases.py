"""Curves over training -> phases, found by code (method.md §8).

Every curve is read against log10(step): checkpoints are log-spaced, and the phase change of a
small model is a feature of log-time. Step 0 (the initialisation) has no log-step and is left out
of everything here (the tables and figures keep it). A curve is first smoothed (local linear
regression with Gaussian weights of ``width`` decades in log-step); its rate of change is the derivative in log-step.

- :func:`critical_points`: the alternating maxima and minima of a smoothed curve whose swings on
  both sides exceed a fraction of its range (a zig-zag filter: a wiggle below that is noise);
- :func:`phase_change_window`: where the best head's prefix-matching score rises and the ICL
  score falls fastest: the peak of their summed, normalised rates and the span around it where
  the sum stays above half the peak;
- :func:`loss_bump`: whether the loss is non-convex in log-step inside that window;
- :func:`source000_phases`: which of source 000's three phases of interaction energy (IE) and
  KL(model || unigram) appear, each on its own conditions at the same checkpoints, thresholds from the
  curves' noise (:func:`ie_kl_phases`, the earlier rule with thresholds as shares of each curve's range,
  is kept for the phase_change family until it moves to this one).

>>> import numpy as np
>>> steps = np.array([1, 10, 100, 1000, 10000])
>>> [p["kind"] for p in critical_points(steps, np.array([0.0, 1.0, 0.0, 1.0, 0.0]), width=0.01, min_swing=0.5)]
['max', 'min', 'max']
"""

from __future__ import annotations

import numpy as np


def _positive(steps: np.ndarray, *curves: np.ndarray) -> tuple[np.ndarray, ...]:
    steps = np.asarray(steps, dtype=np.float64)
    keep = steps > 0
    if keep.sum() < 3:
        raise ValueError(f"a curve over log-step needs at least 3 checkpoints after step 0, got {int(keep.sum())}")
    if np.any(np.diff(steps[keep]) <= 0):
        raise ValueError("checkpoint steps must increase strictly")
    return (np.log10(steps[keep]), *(np.asarray(c, dtype=np.float64)[keep] for c in curves))


def smooth(coordinate: np.ndarray, values: np.ndarray, width: float) -> np.ndarray:
    """Local linear regression along ``coordinate`` (log10 of the step or of the token index) with
    Gaussian weights of ``width`` (same unit; 0 = unchanged). Unlike a plain kernel average it
    leaves a straight line unchanged, also at the ends of the curve, so a smoothed slope is not
    pulled towards zero at the first or last checkpoint. values: ``[n]`` or ``[n ...]`` (axis 0
    follows ``coordinate``)."""
    values = np.asarray(values, dtype=np.float64)
    if width <= 0:
        return values.copy()
    dx = coordinate[None, :] - coordinate[:, None]  # [i j]: x_j - x_i
    w = np.exp(-0.5 * (dx / width) ** 2)
    s0, s1, s2 = w.sum(1), (w * dx).sum(1), (w * dx**2).sum(1)
    t0 = np.tensordot(w, values, axes=(1, 0))
    t1 = np.tensordot(w * dx, values, axes=(1, 0))
    det = s0 * s2 - s1**2
    extra = (slice(None), *([None] * (values.ndim - 1)))
    linear = det > 1e-12 * s0**2  # else too few points carry weight to fit a slope: weighted mean
    fitted = (s2[extra] * t0 - s1[extra] * t1) / np.where(linear, det, 1.0)[extra]
    return np.where(linear[extra], fitted, t0 / s0[extra])


def rate(log_steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """d values / d log10(step), by second-order finite differences on the (uneven) grid."""
    return np.gradient(values, log_steps)


def zigzag(values: np.ndarray, swing: float) -> list[tuple[int, str]]:
    """Indices of the interior alternating maxima and minima of ``values`` whose rise and fall on
    both sides exceed ``swing``, with their kind ("max" or "min"). The ends never count."""
    points: list[tuple[int, str]] = []
    lo = hi = 0
    trend, ext = 0, 0
    for i in range(1, len(values)):
        v = values[i]
        if trend == 0:
            hi = i if v > values[hi] else hi
            lo = i if v < values[lo] else lo
            if values[hi] - values[lo] > swing:
                if hi > lo:  # fell to lo, then rose: lo is a minimum (unless it is the first point)
                    trend, ext = 1, hi
                    if lo > 0:
                        points.append((lo, "min"))
                else:
                    trend, ext = -1, lo
                    if hi > 0:
                        points.append((hi, "max"))
        elif trend == 1:
            if v >= values[ext]:
                ext = i
            elif values[ext] - v > swing:
                points.append((ext, "max"))
                trend, ext = -1, i
        else:
            if v <= values[ext]:
                ext = i
            elif v - values[ext] > swing:
                points.append((ext, "min"))
                trend, ext = 1, i
    return points


def critical_points(steps: np.ndarray, values: np.ndarray, width: float, min_swing: float) -> list[dict]:
    """Maxima and minima of the smoothed curve whose swings exceed ``min_swing`` x its range:
    ``[{"step", "kind", "value"}]`` in step order (value of the smoothed curve)."""
    log_steps, values = _positive(steps, values)
    smoothed = smooth(log_steps, values, width)
    span = float(smoothed.max() - smoothed.min())
    return [{"step": int(round(10 ** log_steps[i])), "kind": kind, "value": float(smoothed[i])}
            for i, kind in zigzag(smoothed, min_swing * span)] if span > 0 else []


def _half_max_span(log_steps: np.ndarray, r: np.ndarray, peak: int) -> tuple[float, float]:
    """log-steps where ``r`` falls to half its value at ``peak``, left and right (linear interpolation)."""
    half = r[peak] / 2
    i = peak
    while i > 0 and r[i - 1] >= half:
        i -= 1
    left = log_steps[i] if i == 0 else np.interp(half, [r[i - 1], r[i]], [log_steps[i - 1], log_steps[i]])
    j = peak
    while j < len(r) - 1 and r[j + 1] >= half:
        j += 1
    right = log_steps[j] if j == len(r) - 1 else np.interp(half, [r[j + 1], r[j]], [log_steps[j + 1], log_steps[j]])
    return float(left), float(right)


def phase_change_window(steps: np.ndarray, prefix_matching: np.ndarray, icl_score: np.ndarray,
                        width: float) -> dict:
    """The phase-change window: where the best head's prefix-matching score rises and the ICL score
    falls fastest.

    Each curve is smoothed; its rate in log-step (the prefix-matching rate, minus the ICL rate, as
    in-context learning lowers the score), clipped at 0, is divided by its maximum; the window is
    the span around the peak of their sum where the sum stays above half the peak. Returns steps
    (``start``, ``peak``, ``end``, not necessarily checkpoints), each curve's own fastest step and
    its largest rate (per decade of steps: how sharp the change is), and whether both curves peak
    inside the window.
    """
    log_steps, pm, icl = _positive(steps, prefix_matching, icl_score)
    r_pm = np.clip(rate(log_steps, smooth(log_steps, pm, width)), 0, None)
    r_icl = np.clip(-rate(log_steps, smooth(log_steps, icl, width)), 0, None)
    parts = [r / r.max() if r.max() > 0 else r for r in (r_pm, r_icl)]
    combined = parts[0] + parts[1]
    peak = int(np.argmax(combined))
    start, end = _half_max_span(log_steps, combined, peak) if combined[peak] > 0 else (log_steps[0], log_steps[-1])
    pm_peak, icl_peak = int(np.argmax(r_pm)), int(np.argmax(r_icl))

    def inside(i: int) -> bool:
        return bool(start <= log_steps[i] <= end)

    first, last = 10 ** log_steps[0], 10 ** log_steps[-1]
    return {
        "start": round(float(np.clip(10**start, first, last)), 3), "peak": int(round(10 ** log_steps[peak])),
        "end": round(float(np.clip(10**end, first, last)), 3),
        "prefix_matching_fastest_step": int(round(10 ** log_steps[pm_peak])),
        "prefix_matching_max_rate_per_decade": float(r_pm[pm_peak]),
        "icl_fastest_step": int(round(10 ** log_steps[icl_peak])),
        "icl_max_rate_per_decade": float(r_icl[icl_peak]),
        "both_peak_inside": inside(pm_peak) and inside(icl_peak),
    }


def loss_bump(steps: np.ndarray, loss: np.ndarray, start: float, end: float, width: float,
              tolerance: float = 1e-3) -> dict:
    """Is the loss non-convex in log-step inside [start, end]? (Olsson et al.'s "bump".)

    Second divided differences of the smoothed loss against log10(step) at the checkpoints inside
    the window with a neighbour on each side; non-convex when one is below ``-tolerance`` (nats per
    decade squared; a bump of 0.05 nats over a third of a decade reaches about -2).
    """
    log_steps, loss = _positive(steps, loss)
    loss = smooth(log_steps, loss, width)
    slopes = np.diff(loss) / np.diff(log_steps)
    second = 2 * np.diff(slopes) / (log_steps[2:] - log_steps[:-2])  # at log_steps[1:-1]
    inside = (log_steps[1:-1] >= np.log10(start)) & (log_steps[1:-1] <= np.log10(end))
    if not inside.any():
        return {"checkpoints_inside": 0, "min_second_derivative": None, "nonconvex": False}
    lowest = float(second[inside].min())
    return {"checkpoints_inside": int(inside.sum()), "min_second_derivative": lowest,
            "nonconvex": bool(lowest < -tolerance)}


def ie_kl_phases(steps: np.ndarray, ie: np.ndarray, kl: np.ndarray, width: float, min_swing: float) -> dict:
    """Which of source 000's three phases the smoothed IE and KL(model || unigram) curves show.

    - phase 1, unigram learned (KL low, IE high): KL has a minimum (the first, at step ``s1``)
      and IE at ``s1`` is above its later minimum by more than the swing;
    - phase 2 (KL up, IE down): after ``s1`` (the first checkpoint if KL has no minimum) KL rises
      and IE falls, each by more than its swing;
    - phase 3 (IE up again, KL high): IE has a minimum at ``s2`` after ``s1`` (the end of phase 2),
      after which it rises by more than its swing while KL stays above the middle of its phase-2
      rise.

    Swings are ``min_swing`` x each smoothed curve's range. Returns the flags, ``s1``, ``s2`` and
    the critical points of both curves.
    """
    log_steps, ie_v, kl_v = _positive(steps, ie, kl)
    ie_s, kl_s = smooth(log_steps, ie_v, width), smooth(log_steps, kl_v, width)
    ie_swing = min_swing * float(ie_s.max() - ie_s.min())
    kl_swing = min_swing * float(kl_s.max() - kl_s.min())
    kl_points, ie_points = zigzag(kl_s, kl_swing), zigzag(ie_s, ie_swing)
    kl_minima = [i for i, kind in kl_points if kind == "min"]
    i1 = kl_minima[0] if kl_minima else 0
    later_ie_minima = [i for i, kind in ie_points if kind == "min" and i > i1]
    i2 = later_ie_minima[0] if later_ie_minima else None

    phase1 = bool(kl_minima) and ie_s[i1] - ie_s[i1:].min() > ie_swing
    kl_rise = float(kl_s[i1:].max() - kl_s[i1])
    phase2 = kl_rise > kl_swing and ie_s[i1] - ie_s[i1:].min() > ie_swing
    phase3 = False
    if phase2 and i2 is not None:
        kl_middle = kl_s[i1] + kl_rise / 2
        phase3 = bool(ie_s[i2:].max() - ie_s[i2] > ie_swing and kl_s[i2:].min() > kl_middle)

    def at(i: int | None) -> int | None:
        return None if i is None else int(round(10 ** log_steps[i]))

    def named(points: list[tuple[int, str]], curve: np.ndarray) -> list[dict]:
        return [{"step": at(i), "kind": kind, "value": float(curve[i])} for i, kind in points]

    return {
        "phase_1": bool(phase1), "phase_2": bool(phase2), "phase_3": bool(phase3),
        "unigram_step": at(i1) if kl_minima else None, "ie_minimum_step": at(i2),
        "ie_critical_points": named(ie_points, ie_s), "kl_critical_points": named(kl_points, kl_s),
    }


def log_position_derivative(loss_by_position: np.ndarray, width: float) -> np.ndarray:
    """d loss / d ln(token index) along the last axis (token index = position + 1): Olsson et al.'s
    "in-context learning per small increase in context length"; negative where later tokens gain.

    The loss is first smoothed over log10(token index) with ``width`` decades: late positions are
    close in log-index, so unsmoothed differences of a finite sample's per-position loss are noise.
    """
    loss = np.asarray(loss_by_position, dtype=np.float64)
    index = np.arange(1, loss.shape[-1] + 1)
    smoothed = np.moveaxis(smooth(np.log10(index), np.moveaxis(loss, -1, 0), width), 0, -1)
    return np.gradient(smoothed, np.log(index), axis=-1)


def curve_noise(values: np.ndarray) -> float:
    """A curve's own noise from checkpoint to checkpoint: a robust standard deviation (1.4826 x the median
    absolute deviation) of its second differences, over sqrt(6) (the second difference of independent noise
    of standard deviation s has standard deviation s sqrt(6)). A trend that is straight over three
    neighbouring checkpoints cancels; a sharp turn is one large difference among many, which the median
    ignores. (The residual about the smoothed curve underestimates the noise where the smoothing window holds
    few checkpoints.)"""
    second = np.diff(np.asarray(values, dtype=np.float64), 2)
    if len(second) == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(second - np.median(second))) / np.sqrt(6))


def source000_phases(steps: np.ndarray, ie: np.ndarray, kl: np.ndarray, width: float, z: float) -> dict:
    """Which of source 000's three phases of interaction energy (IE) and KL(model || unigram) the curves show,
    each phase tested on its own conditions, both curves at the same checkpoints, every threshold ``z`` times
    that curve's noise (:func:`curve_noise`; ``d_ie``, ``d_kl``). On the smoothed curves (step 0 left out):

    - phase 1, the unigram learned (KL low and IE high at once): at ``s1``, the first minimum of KL (a swing of
      ``d_kl`` on both sides), KL lies more than ``d_kl`` below the middle of its range over training and IE
      more than ``d_ie`` above the middle of its range ("low" and "high": in the lower and upper half);
    - phase 2 (KL up while IE goes down): from ``s1`` (the first checkpoint where KL has no minimum) to ``s2``,
      IE's lowest point after it, KL rises by more than ``d_kl`` and IE falls by more than ``d_ie``;
    - phase 3 (IE up again with KL high), after phase 2: from ``s2`` to ``s3``, IE's highest point after it, IE
      rises by more than ``d_ie`` while KL stays high, more than ``d_kl`` above the middle of its range, at every
      checkpoint between.

    Returns the three flags, ``s1``, ``s2``, ``s3`` (steps; None where a phase has no checkpoint), both curves'
    values there, the noises and thresholds, and the critical points of both curves (swings above the
    thresholds)."""
    log_steps, ie_v, kl_v = _positive(steps, ie, kl)
    ie_s, kl_s = smooth(log_steps, ie_v, width), smooth(log_steps, kl_v, width)
    noise = {"ie": curve_noise(ie_v), "kl": curve_noise(kl_v)}
    d_ie, d_kl = z * noise["ie"], z * noise["kl"]
    kl_points, ie_points = zigzag(kl_s, d_kl), zigzag(ie_s, d_ie)
    kl_minima = [i for i, kind in kl_points if kind == "min"]
    i1 = kl_minima[0] if kl_minima else 0
    ie_mid, kl_mid = (ie_s.max() + ie_s.min()) / 2, (kl_s.max() + kl_s.min()) / 2
    phase1 = bool(kl_minima) and kl_mid - kl_s[i1] > d_kl and ie_s[i1] - ie_mid > d_ie
    i2 = i1 + int(np.argmin(ie_s[i1:]))
    phase2 = bool(i2 > i1 and kl_s[i2] - kl_s[i1] > d_kl and ie_s[i1] - ie_s[i2] > d_ie)
    i3 = i2 + int(np.argmax(ie_s[i2:]))
    phase3 = bool(phase2 and i3 > i2 and ie_s[i3] - ie_s[i2] > d_ie and kl_s[i2:i3 + 1].min() - kl_mid > d_kl)

    def at(i: int | None) -> int | None:
        return None if i is None else int(round(10 ** log_steps[i]))

    def named(points: list[tuple[int, str]], curve: np.ndarray) -> list[dict]:
        return [{"step": at(i), "kind": kind, "value": float(curve[i])} for i, kind in points]

    checkpoints = {"s1": i1 if kl_minima else None, "s2": i2 if i2 > i1 else None, "s3": i3 if i3 > i2 else None}
    return {
        "phase_1": bool(phase1), "phase_2": phase2, "phase_3": phase3,
        "unigram_step": at(checkpoints["s1"]), "ie_minimum_step": at(checkpoints["s2"]),
        "ie_rebound_step": at(checkpoints["s3"]),
        "at": {name: None if i is None else {"step": at(i), "ie": float(ie_s[i]), "kl": float(kl_s[i])}
               for name, i in {"start": 0, **checkpoints}.items()},
        "noise": noise, "z": z, "thresholds": {"ie": d_ie, "kl": d_kl},
        "middle": {"ie": float(ie_mid), "kl": float(kl_mid)},
        "ie_critical_points": named(ie_points, ie_s), "kl_critical_points": named(kl_points, kl_s),
    }
