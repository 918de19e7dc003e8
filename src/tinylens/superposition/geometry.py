"""Geometry of the learned features: norms, feature dimensionality D_i and D*, polygons (method.md §11).

``W`` is ``[... hidden features]``: column ``W_i`` is where feature ``i`` is
written in the hidden space. Functions accept any leading batch dimensions
(models, snapshots) and work on them at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    import torch

#: A feature whose column is shorter than this is "not represented" (trained columns are ~1 or ~0).
REPRESENTED_NORM = 0.5

POLYGON_NAMES = {3: "triangle", 5: "pentagon", 6: "hexagon", 7: "heptagon", 8: "octagon"}


def feature_norms(W: torch.Tensor) -> torch.Tensor:
    """||W_i|| [... features]."""
    return W.norm(dim=-2)


def feature_dimensionality(W: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """D_i = ||W_i||^2 / sum_j (W_i_hat . W_j)^2 [... features] (0 for a zero column).

    The fraction of a dimension feature i has to itself: 1 for a column
    orthogonal to every other, 1/2 for an antipodal pair, 2/5 for a regular
    pentagon in 2-D.
    """
    import torch
    W = W.double()
    norms_sq = (W**2).sum(-2)  # [... features]
    gram = W.transpose(-1, -2) @ W  # [... features features], gram[i, j] = W_i . W_j
    # sum_j (W_i . W_j)^2 / ||W_i||^2 = sum_j (W_i_hat . W_j)^2
    interference = (gram**2).sum(-1) / norms_sq.clamp_min(eps)
    return torch.where(norms_sq > eps, norms_sq / interference.clamp_min(eps), torch.zeros_like(norms_sq))


def dimensions_per_feature(W: torch.Tensor) -> torch.Tensor:
    """D* = hidden / ||W||_F^2 [...]: dimensions per (unit-norm-equivalent) feature."""
    return W.shape[-2] / (W.double() ** 2).sum((-2, -1))


def polygon_name(W2: np.ndarray, threshold: float = REPRESENTED_NORM, tol_deg: float = 12.0) -> tuple[str, int]:
    """Name the polygon the represented columns of one 2-D model form; also their count.

    W2 is [2 features]. Regular k-gons (every gap between neighbouring
    represented directions within ``tol_deg`` of 360/k) are named (k = 4 is
    "two digons": two antipodal pairs at right angles, each pair a digon in
    its own dimension); two columns are a "digon" when antipodal and an
    "orthogonal pair" at right angles; four columns as two antipodal pairs
    at another angle are "two digons (skewed)"; five that are not regular
    are a "deformed pentagon"; anything else "irregular k".
    """
    W2 = np.asarray(W2, dtype=float)
    if W2.ndim != 2 or W2.shape[0] != 2:
        raise ValueError(f"polygon_name needs one model's [2 features] weights, got shape {W2.shape}")
    norms = np.linalg.norm(W2, axis=0)
    rep = norms > threshold
    k = int(rep.sum())
    if k == 0:
        return "none", 0
    if k == 1:
        return "one feature", 1
    angles = np.sort(np.degrees(np.arctan2(W2[1, rep], W2[0, rep])) % 360)
    gaps = np.diff(np.append(angles, angles[0] + 360))
    if k == 2:
        gap = min(gaps)
        if abs(gap - 180) <= tol_deg:
            return "digon", 2
        if abs(gap - 90) <= tol_deg:
            return "orthogonal pair", 2
        return "irregular 2", 2
    if np.all(np.abs(gaps - 360 / k) <= tol_deg):
        return ("two digons" if k == 4 else POLYGON_NAMES.get(k, f"regular {k}-gon")), k
    if k == 4 and _antipodal_pairs(angles, tol_deg) == 2:
        return "two digons (skewed)", 4
    if k == 5:
        return "deformed pentagon", 5
    return f"irregular {k}", k


def _antipodal_pairs(angles: np.ndarray, tol_deg: float) -> int:
    used, pairs = set(), 0
    for i in range(len(angles)):
        for j in range(i + 1, len(angles)):
            if i in used or j in used:
                continue
            diff = abs((angles[j] - angles[i]) % 360 - 180)
            if diff <= tol_deg:
                used |= {i, j}
                pairs += 1
    return pairs


def column_angles(W2: torch.Tensor) -> torch.Tensor:
    """Direction of each column in degrees, [0, 360) [... features], for 2-D hidden spaces."""
    import torch
    return torch.rad2deg(torch.atan2(W2[..., 1, :], W2[..., 0, :])) % 360


def regular_polygon(k: int, n_features: int | None = None, start_deg: float = 90.0) -> torch.Tensor:
    """Unit columns at the vertices of a regular k-gon, [2 n_features]; features after k are zero."""
    import torch
    n_features = n_features or k
    W = torch.zeros(2, n_features)
    for i in range(k):
        a = math.radians(start_deg + 360 * i / k)
        W[:, i] = torch.tensor([math.cos(a), math.sin(a)])
    return W
