"""The non-uniform phase change (n = 5, m = 2): pentagon vs two digons, and where their losses cross.

Four features keep one density; the "odd" feature's density is swept. Two
stacks of models start from configurations that favour each geometry, a
regular pentagon of all five features, and two digons (features 0-2 and
1-3 antipodal, at right angles) with the odd feature at zero, so each
geometry's loss can be followed past the point where it stops being the
best one. method.md §11.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tinylens.superposition.geometry import regular_polygon

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    import torch

STARTS = ("pentagon", "two digons")


def start_weights(geometry: str, n_models: int, n_features: int = 5, odd: int = 4,
                  bias: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(W [models 2 features], b [models features]) at the start that favours ``geometry``."""
    import torch
    if n_features != 5:
        raise ValueError(f"the pentagon/digon starts are defined for 5 features, got {n_features}")
    if geometry == "pentagon":
        W = regular_polygon(5)
    elif geometry == "two digons":
        W = regular_polygon(4, 5)  # square: vertices 0 and 2, 1 and 3 antipodal
        order = [i for i in range(5) if i != odd]
        W = torch.stack([W[:, order.index(i)] if i != odd else torch.zeros(2) for i in range(5)], -1)
    else:
        raise ValueError(f"unknown start geometry {geometry!r}; choose one of {STARTS}")
    return W.expand(n_models, 2, 5).clone(), torch.full((n_models, 5), bias)


def crossings(x: np.ndarray, diff: np.ndarray, log_x: bool = True) -> list[float]:
    """Every x where ``diff`` changes sign, by linear interpolation (in log x when ``log_x``).

    x increasing; NaN entries of diff are skipped (a pair of neighbours is
    interpolated only if both are finite).
    """
    x = np.asarray(x, dtype=float)
    diff = np.asarray(diff, dtype=float)
    if np.any(np.diff(x) <= 0):
        raise ValueError("x must increase")
    u = np.log(x) if log_x else x
    out = []
    for i in range(len(x) - 1):
        a, b = diff[i], diff[i + 1]
        if not (np.isfinite(a) and np.isfinite(b)):
            continue
        if a == 0:
            out.append(float(x[i]))
        elif a * b < 0:
            t = a / (a - b)
            v = u[i] + t * (u[i + 1] - u[i])
            out.append(float(np.exp(v) if log_x else v))
    if len(diff) and diff[-1] == 0 and np.isfinite(diff[-1]):
        out.append(float(x[-1]))
    return out
