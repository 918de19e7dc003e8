"""Feature dimensionality over training: plateaus at simple fractions and the jumps between them.

Elhage et al. (2022) saw each feature's D_i sit on a fraction (1, 3/4,
2/3, 1/2, 2/5, ...) for a while and then move to another quickly: the
"energy level" picture (method.md §11). Here a plateau is a run of at least
``min_dwell`` consecutive snapshots whose (running-median smoothed) D_i all
lie within ``tol`` of the same level; a move is two consecutive plateaus of
one feature at different levels with at most ``max_transition`` snapshots
between them (a slower drift from one level to another is not a move),
located at the first snapshot where D_i is nearer the new level than the
old. A move is a jump when the two levels lie at least ``margin`` times the
curve's own noise apart (:func:`plateau_noise`): a hop between neighbouring
levels that the optimiser's jitter could produce is not a jump.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tinylens.superposition.levels import nearest_fraction


@dataclass(frozen=True)
class Jump:
    feature: int
    step: int  # first snapshot step nearer the new level than the old
    from_fraction: Fraction
    to_fraction: Fraction
    left_step: int  # last step of the plateau it leaves
    arrive_step: int  # first step of the plateau it reaches
    noise: float = float("nan")  # the feature's curve noise (plateau_noise)
    size_over_noise: float = float("nan")  # |to - from| / noise
    exceeds_noise: bool = True  # size_over_noise >= the margin: a jump, not a noise-level move


def plateaus(labels: np.ndarray, min_dwell: int) -> list[tuple[int, int, int]]:
    """Runs (start, end inclusive, label) of one label (>= 0) lasting at least ``min_dwell`` entries."""
    runs, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            if labels[start] >= 0 and i - start >= min_dwell:
                runs.append((start, i - 1, int(labels[start])))
            start = i
    return runs


def running_median(d: np.ndarray, window: int) -> np.ndarray:
    """Median over a centred window of ``window`` (odd) snapshots, along axis 0; the ends use what exists."""
    if window <= 1:
        return np.asarray(d, dtype=float)
    if window % 2 == 0:
        raise ValueError(f"the smoothing window must be odd, got {window}")
    d = np.asarray(d, dtype=float)
    half = window // 2
    padded = np.pad(d, [(half, half)] + [(0, 0)] * (d.ndim - 1), constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, window, axis=0)
    return np.nanmedian(windows, axis=-1)


def plateau_noise(d: np.ndarray, values: np.ndarray, runs: Sequence[tuple[int, int, int]]) -> float:
    """The noise of one curve d [snapshots]: a robust standard deviation (1.4826 x the median absolute
    deviation) of its raw values about the level of the plateau they belong to, over all its plateaus
    (``runs`` from :func:`plateaus`); NaN without a plateau. It counts the optimiser's jitter and any
    offset of the curve from the fraction it is labelled with."""
    dev = [np.abs(d[s:e + 1] - values[k]) for s, e, k in runs]
    return float(1.4826 * np.median(np.concatenate(dev))) if dev else float("nan")


def find_jumps(steps: Sequence[int], d: np.ndarray, levels: Sequence[Fraction], tol: float = 0.02,
               min_dwell: int = 3, smooth: int = 1, max_transition: int | None = None,
               margin: float = 0.0, keep_small: bool = False) -> list[Jump]:
    """Jumps of every feature; d is D_i per snapshot [snapshots features], steps the snapshot steps.

    ``smooth`` > 1 first takes a running median over that many snapshots,
    so that optimiser noise around a level is not read as leaving it. A
    move counts as a jump when |to - from| >= ``margin`` x the curve's
    noise (:func:`plateau_noise`, on the raw curve); ``keep_small`` also returns the
    moves below that margin, with ``exceeds_noise`` False.
    """
    steps = np.asarray(steps)
    d = np.asarray(d, dtype=float)
    if d.ndim != 2 or d.shape[0] != len(steps):
        raise ValueError(f"d must be [snapshots features] with {len(steps)} snapshots, got shape {d.shape}")
    if np.any(np.diff(steps) <= 0):
        raise ValueError("snapshot steps must increase")
    raw = d
    d = running_median(d, smooth)
    idx, dist = nearest_fraction(d, levels)
    labels = np.where(dist <= tol, idx, -1)
    values = np.array([float(f) for f in levels])
    jumps = []
    for f in range(d.shape[1]):
        runs = plateaus(labels[:, f], min_dwell)
        noise = plateau_noise(raw[:, f], values, runs)
        for (_, end, a), (start, _, b) in zip(runs, runs[1:]):
            if a == b or (max_transition is not None and start - end - 1 > max_transition):
                continue
            between = d[end + 1: start + 1, f]
            closer = np.flatnonzero(np.abs(between - values[b]) < np.abs(between - values[a]))
            at = end + 1 + int(closer[0])
            size = abs(values[b] - values[a]) / noise if noise > 0 else float("inf")
            if size < margin and not keep_small:
                continue
            jumps.append(Jump(feature=f, step=int(steps[at]), from_fraction=levels[a], to_fraction=levels[b],
                              left_step=int(steps[end]), arrive_step=int(steps[start]), noise=noise,
                              size_over_noise=float(size), exceeds_noise=bool(size >= margin)))
    return sorted(jumps, key=lambda j: (j.step, j.feature))
