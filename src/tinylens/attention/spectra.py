"""Each head's attention matrix as a causal random walk (method.md §10).

An attention pattern ``S`` (``[... pos pos]``, query rows, key columns) is row-stochastic and,
being causal, lower triangular, so its eigenvalues are its diagonal ``S_ii`` (the weight a
position puts on itself). Read backwards, ``S`` is a random walk over positions: a walker at
position ``i`` steps to ``j <= i`` with probability ``S_ij``. Position 0 attends only to itself
(``S_00 = 1``), so it absorbs every walk; ``(S^k)_{i0}`` is the mass absorbed after ``k`` steps
from ``i``, and the largest diagonal entry outside position 0 is the slowest transient eigenvalue
(the asymptotic rate at which unabsorbed mass decays).

The odds-ratio reading: ``log S_ij - log S_ik = q_i . (k_j - k_k) / sqrt(d_head)``, so within a
row only the score's variation over keys matters. Two splits of that within-row variation:

- **distance / key norm** (the source's algebra): ``q.k = (|q|^2 + |k|^2 - |q - k|^2) / 2``; within
  a row ``|q_i|^2`` is constant, leaving ``-|q_i - k_j|^2 / (2 sqrt(d_head))`` (the query-key
  distance term) and ``|k_j|^2 / (2 sqrt(d_head))`` (the key-norm term). The two are correlated, so
  the within-row sum of squares is distance + key norm + 2 x their cross term (which can be
  negative); the three shares sum to 1.
- **key effect / interaction** (least squares, orthogonal): fit ``s_ij = a_i + b_j`` over the causal
  triangle of one matrix; ``b_j`` is everything that depends on the key alone (constant over
  queries: key norm and the key's alignment with the typical query), the residual is the part
  that depends on the query-key pair. The two shares sum to 1.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from tinylens.attention.schemas import EIGEN_AGREEMENT
from tinylens.interventions import run
from tinylens.model import Transformer

#: The sums of squares :func:`score_sums_of_squares` returns.
SUM_KEYS = ("total", "distance", "key_norm", "cross", "key_effect")


def diagonal(pattern: Tensor) -> Tensor:
    """Self-attention weights ``S_ii``: ``[... pos pos] -> [... pos]`` (the eigenvalues of a causal S)."""
    return pattern.diagonal(dim1=-2, dim2=-1)


def causal_checks(pattern: Tensor) -> dict[str, float]:
    """How far ``pattern`` is from a causal row-stochastic matrix: the largest ``|row sum - 1|``, the
    largest weight above the diagonal, and the smallest entry (all three 0 for an exact one)."""
    p = pattern.double()
    return {
        "row_sum_max_error": float((p.sum(-1) - 1).abs().max()),
        "above_diagonal_max": float(p.triu(1).abs().max()),
        "min_entry": float(p.min()),
    }


def eigenvalue_diagonal_gap(pattern: Tensor, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Eigenvalues from a general numerical eigensolver against the diagonal, per matrix.

    pattern ``[... pos pos]`` -> (the largest ``|eigenvalue - diagonal entry|`` after sorting both by
    real part, the largest ``|imaginary part|``), each ``[...]``. LAPACK's balancing step recognises
    a triangular matrix and hands back its diagonal untouched, so the solver is given ``Q S Q^T``
    for a random orthogonal ``Q`` (same eigenvalues, no zero pattern left) and must find them.
    Both are at rounding level for a well-conditioned triangular ``S``. Real attention matrices are
    far from normal: runs of similar small diagonal entries under large off-diagonal weights make
    them nearly defective, and a perturbation of size eps moves such eigenvalues by up to about
    eps^(1/m) for a near-Jordan block of size m (0.1 for eps = 1e-15 and m around 15). The identity
    eigenvalues = diagonal is exact; what the gap measures is how ill-conditioned those
    eigenvalues are, hence :data:`~tinylens.attention.schemas.EIGEN_AGREEMENT`.
    """
    p = pattern.double()
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(p.shape[-1], p.shape[-1], generator=generator, dtype=torch.float64))
    q = q.to(p.device)
    eig = torch.linalg.eigvals(q @ p @ q.T)
    real = eig.real.sort(dim=-1).values
    diag = diagonal(p).sort(dim=-1).values
    return (real - diag).abs().amax(-1), eig.imag.abs().amax(-1)


def walk_steps(n_doublings: int) -> list[int]:
    """The walk lengths the absorption curve is sampled at: 1, 2, 4, ..., 2**n_doublings."""
    return [2**i for i in range(n_doublings + 1)]


def absorption(pattern: Tensor, n_doublings: int) -> Tensor:
    """Mass that ``S^k`` puts on position 0, from every start position, for k in :func:`walk_steps`.

    pattern ``[... pos pos]`` -> ``[... len(steps) pos]`` (float64): entry ``[..., m, i]`` is
    ``(S^(2^m))_{i0}``. Computed by repeated squaring in float64.
    """
    power = pattern.double()
    out = []
    for _ in range(n_doublings + 1):
        out.append(power[..., :, 0])
        power = power @ power
    return torch.stack(out, dim=-2)


def half_absorption_steps(steps, mass) -> float:
    """Walk length at which the absorbed mass first reaches 0.5, interpolated in log2(k).

    steps: increasing walk lengths; mass: the absorbed mass at each (non-decreasing). ``inf`` when
    it never does within the longest walk, 1.0 when the first step already does.
    """
    steps, mass = np.asarray(steps, dtype=np.float64), np.asarray(mass, dtype=np.float64)
    above = np.nonzero(mass >= 0.5)[0]
    if not len(above):
        return math.inf
    m = int(above[0])
    if m == 0:
        return float(steps[0])
    lo, hi = np.log2(steps[m - 1]), np.log2(steps[m])
    frac = (0.5 - mass[m - 1]) / (mass[m] - mass[m - 1])
    return float(2 ** (lo + frac * (hi - lo)))


def slowest_transient_eigenvalue(pattern: Tensor) -> Tensor:
    """The largest diagonal entry outside position 0: ``[... pos pos] -> [...]``. Unabsorbed mass of
    the backward walk decays like this eigenvalue to the power k."""
    return diagonal(pattern)[..., 1:].amax(-1)


def causal_scores(q: Tensor, k: Tensor) -> Tensor:
    """Attention scores ``q_i . k_j / sqrt(d_head)`` with ``-inf`` above the diagonal, in float64.

    q, k: ``[... pos d_head]`` -> ``[... pos pos]``; ``softmax`` of it over the last axis is the pattern.
    """
    q, k = q.double(), k.double()
    pos = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(pos, pos, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf"))


def key_effect_gram(pos: int) -> Tensor:
    """Normal matrix of the key effect ``b`` in the row-centred two-way fit over a causal triangle.

    Row-centring ``a_i + b_j`` over ``j <= i`` leaves ``b_j - mean_{l<=i} b_l``; the map from ``b``
    to those entries is ``M`` and this is ``M^T M``: ``G_lm = sum_{i >= max(l, m)} (delta_lm - 1/(i+1))``.
    ``[pos pos]`` float64 (singular: adding a constant to ``b`` changes nothing).
    """
    i = torch.arange(pos, dtype=torch.float64)
    tail = torch.flip(torch.cumsum(torch.flip(1.0 / (i + 1), [0]), 0), [0])  # sum_{i >= l} 1/(i+1)
    count = pos - i  # number of rows i >= l
    lm = torch.maximum(i[:, None], i[None, :]).long()
    return torch.diag(count) - tail[lm]


def score_sums_of_squares(q: Tensor, k: Tensor) -> dict[str, Tensor]:
    """Within-row sums of squares of the scores and of their parts, per attention matrix.

    q, k: ``[... pos d_head]`` (one head's queries and keys for one sequence per leading index).
    Returns float64 tensors ``[...]``: ``total`` (of the row-centred scores over ``j <= i``),
    ``distance``, ``key_norm`` and ``cross`` (2 x the cross term; ``distance + key_norm + cross ==
    total``), and ``key_effect`` (explained by the least-squares key term ``b_j``; the query-key
    interaction is ``total - key_effect``). Sum them over sequences before dividing, so every
    row counts by its number of keys.
    """
    scores = causal_scores(q, k)
    pos = scores.shape[-1]
    mask = torch.ones(pos, pos, dtype=torch.bool, device=scores.device).tril()
    n_keys = torch.arange(1, pos + 1, dtype=torch.float64, device=scores.device)

    def centred(x: Tensor) -> Tensor:  # x [... pos(query) pos(key)], masked to the triangle and row-centred
        x = torch.where(mask, x, torch.zeros_like(x))
        return torch.where(mask, x - (x.sum(-1, keepdim=True) / n_keys[:, None]), torch.zeros_like(x))

    s = centred(scores)
    key_norm = (k.double() ** 2).sum(-1) / (2 * math.sqrt(k.shape[-1]))  # [... pos(key)]
    n = centred(key_norm.unsqueeze(-2).expand_as(scores))
    d = s - n  # the distance term -|q_i - k_j|^2 / (2 sqrt(d_head)), row-centred
    c = s.sum(-2)  # M^T s: column sums of the row-centred scores over the triangle
    gram_pinv = torch.linalg.pinv(key_effect_gram(pos).to(scores.device))
    return {
        "total": (s**2).sum((-1, -2)),
        "distance": (d**2).sum((-1, -2)),
        "key_norm": (n**2).sum((-1, -2)),
        "cross": 2 * (d * n).sum((-1, -2)),
        "key_effect": torch.einsum("...l,lm,...m->...", c, gram_pinv, c),
    }


# --- the per-head tables of a model ------------------------------------------------------------



def measure_heads(model: Transformer, tokens: Tensor, n_doublings: int, eigen_sample: int,
                  batch_size: int = 16, progress: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Every head's spectra on ``tokens`` ``[sequences pos]``: the columns of :data:`~tinylens.attention.schemas.DIAGONAL_SCHEMA`,
    ``ABSORPTION_SCHEMA`` and ``HEAD_SCHEMA`` (keys ``diagonal``, ``absorption``, ``heads``).

    The first ``eigen_sample`` sequences' matrices (every head) go through a numerical eigensolver.
    """
    cfg = model.config
    n_seq, pos = tokens.shape
    if pos < 2:
        raise ValueError("the spectra need sequences of at least 2 positions")
    record = ["blocks.*.attn_pattern", "blocks.*.q", "blocks.*.k"]
    acc: dict[str, list[Tensor]] = {k: [] for k in ("diag", "absorbed", "slowest", "eigen_gap", "pattern_error",
                                                    *SUM_KEYS, "row_sum", "above")}
    for start in tqdm(range(0, n_seq, batch_size), desc="attention spectra", disable=not progress):
        chunk = tokens[start : start + batch_size]
        with torch.no_grad():
            trace = run(model, chunk, record=record)
        pattern = trace.stacked("attn_pattern").double()  # [block batch n_heads pos pos]
        q, k = trace.stacked("q"), trace.stacked("k")  # [block batch n_heads pos d_head]
        pattern_t = pattern.transpose(1, 2)  # [block n_heads batch pos pos]
        acc["diag"].append(diagonal(pattern_t))
        acc["absorbed"].append(absorption(pattern_t, n_doublings))
        acc["slowest"].append(slowest_transient_eigenvalue(pattern_t))
        acc["pattern_error"].append((pattern_t - torch.softmax(causal_scores(q, k), -1).transpose(1, 2))
                                    .abs().amax((-1, -2)))
        acc["row_sum"].append((pattern_t.sum(-1) - 1).abs().amax(-1))
        acc["above"].append(pattern_t.triu(1).abs().amax((-1, -2)))
        sums = score_sums_of_squares(q, k)  # [block batch n_heads]
        for key in SUM_KEYS:
            acc[key].append(sums[key].transpose(1, 2))
        n_eigen = min(max(eigen_sample - start, 0), len(chunk))
        if n_eigen:
            acc["eigen_gap"].append(eigenvalue_diagonal_gap(pattern_t[:, :, :n_eigen])[0])
    cat = {k: torch.cat(v, dim=2).cpu() for k, v in acc.items() if v}  # [block n_heads sequences ...]
    steps = walk_steps(n_doublings)
    blocks, heads = np.meshgrid(np.arange(cfg.n_layer), np.arange(cfg.n_head), indexing="ij")
    diag = cat["diag"].numpy()  # [block n_heads seq pos]
    b_, h_, s_, p_ = np.meshgrid(np.arange(cfg.n_layer), np.arange(cfg.n_head), np.arange(n_seq), np.arange(pos),
                                 indexing="ij")
    diagonal_cols = {"block": b_.ravel(), "head": h_.ravel(), "sequence": s_.ravel(), "position": p_.ravel(),
                     "weight": diag.ravel().astype(np.float32)}
    absorbed = cat["absorbed"]  # [block n_heads seq steps pos]
    from_last = absorbed[..., -1].mean(2).numpy()  # [block n_heads steps]
    mean_start = absorbed[..., 1:].mean((2, 4)).numpy()
    bk, hk, kk = np.meshgrid(np.arange(cfg.n_layer), np.arange(cfg.n_head), steps, indexing="ij")
    absorption_cols = {"block": bk.ravel(), "head": hk.ravel(), "steps": kk.ravel(),
                       "mass_from_last": from_last.ravel(), "mass_mean": mean_start.ravel()}
    inner = diag[..., 1:].reshape(cfg.n_layer, cfg.n_head, -1)
    totals = {k: cat[k].sum(2).numpy() for k in SUM_KEYS}  # [block n_heads]
    share = {k: totals[k] / totals["total"] for k in SUM_KEYS if k != "total"}
    no_sample = np.full(blocks.shape, np.nan)
    eigen_gap = cat["eigen_gap"].amax(2).numpy() if "eigen_gap" in cat else no_sample
    eigen_gap_median = cat["eigen_gap"].median(2).values.numpy() if "eigen_gap" in cat else no_sample
    eigen_agree = (cat["eigen_gap"] < EIGEN_AGREEMENT).double().mean(2).numpy() if "eigen_gap" in cat else no_sample
    head_cols = {
        "block": blocks.ravel(), "head": heads.ravel(),
        "diag_mean": inner.mean(-1).ravel(), "diag_median": np.median(inner, -1).ravel(),
        "diag_q10": np.quantile(inner, 0.1, axis=-1).ravel(), "diag_q90": np.quantile(inner, 0.9, axis=-1).ravel(),
        "slowest_transient_eigenvalue": cat["slowest"].median(2).values.numpy().ravel(),
        "half_absorption_from_last": np.array([half_absorption_steps(steps, c) for c in from_last.reshape(-1, len(steps))]),
        "half_absorption_mean": np.array([half_absorption_steps(steps, c) for c in mean_start.reshape(-1, len(steps))]),
        "share_distance": share["distance"].ravel(), "share_key_norm": share["key_norm"].ravel(),
        "share_cross": share["cross"].ravel(), "share_key_effect": share["key_effect"].ravel(),
        "share_interaction": 1.0 - share["key_effect"].ravel(),
        "row_sum_max_error": cat["row_sum"].amax(2).numpy().ravel(),
        "above_diagonal_max": cat["above"].amax(2).numpy().ravel(),
        "eigen_gap_median": eigen_gap_median.ravel(), "eigen_gap_max": eigen_gap.ravel(),
        "eigen_agree_share": eigen_agree.ravel(),
        "pattern_vs_scores_max_error": cat["pattern_error"].amax(2).numpy().ravel(),
    }
    return {"diagonal": diagonal_cols, "absorption": absorption_cols, "heads": head_cols}
