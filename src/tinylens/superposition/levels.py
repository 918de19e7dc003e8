"""The simple fractions feature dimensionalities sit on ("energy levels"), without torch.

Used by the maths and by the figure scripts alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np


def parse_fractions(values: Sequence[str | float | int]) -> list[Fraction]:
    """Fractions from config entries such as "3/4", 0.5 or 1; sorted, largest first."""
    out = []
    for v in values:
        try:
            f = Fraction(v) if isinstance(v, str) else Fraction(v).limit_denominator(1000)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{v!r} is not a fraction; write fractions as '3/4', '2/5' or a number") from None
        if not 0 <= f <= 1:
            raise ValueError(f"feature dimensionality fractions lie in [0, 1], got {v!r}")
        out.append(f)
    return sorted(set(out), reverse=True)


def nearest_fraction(d: np.ndarray, fractions: Sequence[Fraction]) -> tuple[np.ndarray, np.ndarray]:
    """For each value, the index of the nearest fraction and the distance to it."""
    levels = np.array([float(f) for f in fractions])
    dist = np.abs(np.asarray(d, dtype=float)[..., None] - levels)
    idx = dist.argmin(-1)
    return idx, np.take_along_axis(dist, idx[..., None], -1)[..., 0]


def fraction_coverage(fractions: Sequence[Fraction], tol: float, low: float, high: float) -> float:
    """Share of [low, high] lying within ``tol`` of some fraction: the chance level of 'near a fraction'."""
    if not high > low:
        raise ValueError(f"need high > low, got [{low}, {high}]")
    windows = sorted((max(low, float(f) - tol), min(high, float(f) + tol)) for f in fractions)
    covered, end = 0.0, low
    for a, b in windows:
        a = max(a, end)
        if b > a:
            covered += b - a
            end = b
    return covered / (high - low)
