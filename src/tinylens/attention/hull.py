"""Source 001's convex-hull reading of attention, in a testable form (method.md §10).

The reading: attention moves a token's state towards a weighted mean of value vectors, so that the
next token's state is about ``V^T A_t`` (head by head: ``m_t = sum_j A_tj v_j``, a point of the
convex hull of the values ``v_0..v_t``), with ``(S - A)^T V V^T (S - A) = |v_S - V^T A|^2`` as its
potential. Taking ``S`` as the selection of the next position, per head ``h`` of block ``b`` and
query position ``t < T - 1`` of a validation window:

- ``potential_t = |v_{t+1} - m_t|^2 / |v_{t+1}|^2`` (0 when the next value is the weighted mean;
  1 when the mean is 0),
- ``cosine_t = cos(v_{t+1}, m_t)``,

where ``v_j = ln1(x_j) W_V^h`` is the head's value of position ``j`` (its ``v`` hook) and ``A`` its
attention pattern. ``m_t`` lies in the hull by construction; the claim to test is that it is near the
next position's value, closer than a weighted mean that does not depend on where the head looks. The
baselines: ``shuffled``, the same row of weights permuted at random over the row's visible positions
``0..t`` (same sharpness, positions chosen at random), and ``uniform``, the plain mean of the visible
values. Everything is averaged per window, and a head's verdict is a paired comparison over windows:
the mean of ``shuffled - real`` potential with its standard error; the reading holds for the head
when that difference exceeds 1.96 standard errors (real attention brings the mean closer to the next
value than shuffled attention does).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from tinylens.attention.schemas import WEIGHTINGS
from tinylens.interventions import run
from tinylens.model import Transformer


def shuffle_rows(pattern: Tensor, generator: torch.Generator) -> Tensor:
    """Each causal row's weights permuted at random over its visible positions ``0..t``:
    ``[... pos pos] -> [... pos pos]``, still causal and row-stochastic."""
    n = pattern.shape[-1]
    keys = torch.rand(pattern.shape, generator=generator, dtype=torch.float64)
    visible = torch.ones(n, n, dtype=torch.bool).tril()
    keys = keys.masked_fill(~visible, float("inf"))  # hidden positions sort last, in their own order
    perm = keys.argsort(dim=-1, stable=True)  # [... t k]: where the row's k-th weight goes
    return torch.zeros_like(pattern).scatter_(-1, perm, pattern)


def uniform_rows(n: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """The causal uniform pattern: row ``t`` puts ``1 / (t + 1)`` on each of ``0..t``."""
    tri = torch.ones(n, n, dtype=dtype).tril()
    return tri / tri.sum(-1, keepdim=True)


def hull_measures(values: Tensor, pattern: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
    """Per window and head, the mean over query positions ``t < T - 1`` of the relative potential and
    the cosine for each of :data:`WEIGHTINGS`. ``values`` ``[batch heads pos d_head]``, ``pattern``
    ``[batch heads pos pos]`` -> ``{"<weighting>_potential" | "<weighting>_cosine": [batch heads]}``."""
    v = values.double()
    a = pattern.double()
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"windows of at least 2 positions are needed, got {n}")
    target = v[..., 1:, :]  # [b h T-1 e]: the next position's value
    target_norm2 = (target * target).sum(-1)
    weights = {"real": a, "shuffled": shuffle_rows(a, generator), "uniform": uniform_rows(n).expand_as(a)}
    out = {}
    for name in WEIGHTINGS:
        m = weights[name][..., :-1, :] @ v  # [b h T-1 e]: the weighted mean of the visible values
        diff = target - m
        potential = (diff * diff).sum(-1) / target_norm2.clamp_min(1e-300)
        dots = (target * m).sum(-1)
        cosine = dots / (target_norm2.sqrt() * m.norm(dim=-1)).clamp_min(1e-300)
        out[f"{name}_potential"] = potential.mean(-1)
        out[f"{name}_cosine"] = cosine.mean(-1)
    return out


@torch.no_grad()
def measure_hull(model: Transformer, windows: Tensor, seed: int) -> dict[str, np.ndarray]:
    """Every block and head on ``windows`` ``[batch pos]``: one row per (block, head, window), the
    columns of :data:`tinylens.attention.schemas.HULL_SCHEMA`. Also checks that the head's output
    ``z`` is ``A v`` (the identity the reading rests on): ``identity_error`` is the largest
    ``|z - A v|`` of the block."""
    model.eval()
    n_layer, n_head = model.config.n_layer, model.config.n_head
    trace = run(model, windows, record=["blocks.*.v", "blocks.*.attn_pattern", "blocks.*.z"])
    generator = torch.Generator().manual_seed(seed)
    cols: dict[str, list] = {}
    for b in range(n_layer):
        v, a, z = (trace[f"blocks.{b}.{k}"] for k in ("v", "attn_pattern", "z"))
        identity = float((z.double() - a.double() @ v.double()).abs().max())
        measures = hull_measures(v, a, generator)
        batch = windows.shape[0]
        rows = {"block": np.full((batch, n_head), b, dtype=np.int8),
                "head": np.broadcast_to(np.arange(n_head, dtype=np.int8), (batch, n_head)),
                "window": np.broadcast_to(np.arange(batch, dtype=np.int32)[:, None], (batch, n_head)),
                **{k: t.cpu().numpy() for k, t in measures.items()},
                "identity_error": np.full((batch, n_head), identity)}
        for k, x in rows.items():
            cols.setdefault(k, []).append(np.ascontiguousarray(x).reshape(-1))
    return {k: np.concatenate(x) for k, x in cols.items()}
