"""One definition of each quantity the analyses compare distributions and vectors with.

Every function works row-wise on the last axis and accepts NumPy arrays or
torch tensors (returning the same kind). Distributions are computed in
float64: the analyses compare distances down to 1e-3.

>>> import numpy as np
>>> float(hellinger(np.array([1.0, 0.0]), np.array([0.0, 1.0])))
1.0
>>> float(kl_divergence(np.array([0.5, 0.5]), np.array([0.5, 0.5])))
0.0
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from tinylens.wording import LEVEL  # the one level of every verdict (the ground floor)

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    import torch

Array = TypeVar("Array", np.ndarray, "torch.Tensor")  # torch is imported where a function needs it


def _is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch: a tensor exists only once torch is imported, so
    a NumPy caller (a summary job) never pays for the import (2-3 CPU-s)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _float64(x):
    if _is_tensor(x):
        return x.double()
    return np.asarray(x, dtype=np.float64)


def softmax(logits: Array) -> Array:
    """Probabilities from logits, in float64."""
    import torch
    if isinstance(logits, torch.Tensor):
        return torch.softmax(logits.double(), dim=-1)
    z = _float64(logits)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(logits: Array) -> Array:
    """Log-probabilities from logits, in float64."""
    import torch
    if isinstance(logits, torch.Tensor):
        return torch.log_softmax(logits.double(), dim=-1)
    z = _float64(logits)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def hellinger(p: Array, q: Array, eps: float = 0.0) -> Array:
    """H(p, q) = ||sqrt(p) - sqrt(q)||_2 / sqrt(2) (method.md §6), in [0, 1].

    ``eps`` > 0 smooths it for gradient descent (``sqrt(p + eps)``, and ``H**2`` kept >= eps), so
    its gradient is finite where a probability or the distance is zero; 0 gives the exact value.
    """
    p, q = _float64(p), _float64(q)
    if _is_tensor(p):
        import torch

        q = q.to(p.device) if isinstance(q, torch.Tensor) else torch.as_tensor(q, device=p.device)
        return torch.sqrt(torch.clamp(0.5 * (((p + eps).sqrt() - (q + eps).sqrt()) ** 2).sum(-1), eps, 1.0))
    return np.sqrt(np.clip(0.5 * ((np.sqrt(p + eps) - np.sqrt(q + eps)) ** 2).sum(axis=-1), eps, 1.0))


def kl_divergence(p: Array, q: Array) -> Array:
    """KL(p || q) = sum p log(p / q) in nats, with 0 log 0 = 0 (infinite where q = 0 < p)."""
    import torch
    p, q = _float64(p), _float64(q)
    if isinstance(p, torch.Tensor):
        terms = torch.where(p > 0, p * (torch.log(p.clamp_min(1e-300)) - torch.log(q)), torch.zeros_like(p))
        return terms.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - np.log(q)), 0.0)
    return terms.sum(axis=-1)


def kl_from_logits(p_logits: Array, q_logits: Array) -> Array:
    """KL(softmax(p_logits) || softmax(q_logits)), stable for confident distributions."""
    import torch
    log_p, log_q = log_softmax(p_logits), log_softmax(q_logits)
    if isinstance(log_p, torch.Tensor):
        return (log_p.exp() * (log_p - log_q)).sum(-1)
    return (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)


def entropy(p: Array) -> Array:
    """Shannon entropy in nats, with 0 log 0 = 0."""
    import torch
    p = _float64(p)
    if isinstance(p, torch.Tensor):
        return -torch.where(p > 0, p * torch.log(p.clamp_min(1e-300)), torch.zeros_like(p)).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=-1)


def cosine(a: Array, b: Array, eps: float = 1e-30) -> Array:
    """Cosine similarity of matching rows of ``a`` and ``b`` (broadcast), in float64; 0 for a zero row."""
    import torch
    a, b = _float64(a), _float64(b)
    if isinstance(a, torch.Tensor):
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)
    return (a * b).sum(axis=-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), eps)


def cosine_matrix(a: Array, b: Array, eps: float = 1e-30) -> Array:
    """All pairwise cosines: a ``[... n d]``, b ``[... m d]`` -> ``[... n m]``, in float64: the same
    ``(a . b) / (|a| |b|)`` as :func:`cosine`, for every pair; 0 where a row is zero. Leading axes
    broadcast (one matrix per sequence of a batch)."""
    import torch
    a, b = _float64(a), _float64(b)
    if isinstance(a, torch.Tensor):
        norms = a.norm(dim=-1)[..., :, None] * b.norm(dim=-1)[..., None, :]
        return (a @ b.transpose(-1, -2)) / norms.clamp_min(eps)
    norms = np.linalg.norm(a, axis=-1)[..., :, None] * np.linalg.norm(b, axis=-1)[..., None, :]
    return (a @ np.swapaxes(b, -1, -2)) / np.maximum(norms, eps)


def descending_ranks(scores: Array, *, base: int, ties: str, index=None) -> Array:
    """Rank of every entry of each row of ``scores`` by decreasing score, counted from ``base`` (0 or 1).

    ``ties="shared"``: tied entries share the best rank among them (``base`` + the number of strictly
    larger entries: a tie counts in the entry's favour); ``ties="by_position"``: of tied entries the
    earlier one ranks first, every rank used once. scores ``[... n]`` -> int64 ``[... n]``; with
    ``index`` (integers ``[...]``), the rank of that entry of each row only: ``[...]``.

    >>> descending_ranks(np.array([0.5, 0.9, 0.5, 0.1]), base=0, ties="by_position").tolist()
    [1, 0, 2, 3]
    >>> descending_ranks(np.array([0.5, 0.9, 0.5, 0.1]), base=1, ties="shared").tolist()
    [2, 1, 2, 4]
    """
    import torch
    if ties not in ("shared", "by_position"):
        raise ValueError(f"ties must be 'shared' or 'by_position', not {ties!r}")
    torch_in = isinstance(scores, torch.Tensor)
    if index is not None and ties == "shared":  # one entry per row: count the larger ones, O(n)
        if torch_in:
            index = torch.as_tensor(index, device=scores.device).long()
            return (scores > scores.gather(-1, index.unsqueeze(-1))).sum(-1) + base
        scores, index = np.asarray(scores), np.asarray(index).astype(np.int64)
        chosen = np.take_along_axis(scores, index[..., None], axis=-1)
        return (scores > chosen).sum(axis=-1).astype(np.int64) + base
    if torch_in:
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
        ordered = scores.gather(-1, order)
        position = torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
        if ties == "shared":  # each entry takes the position of the first of its run of equal scores
            starts = torch.ones_like(ordered, dtype=torch.bool)
            starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
            position = torch.where(starts, position, torch.zeros_like(position)).cummax(-1).values
        ranks = torch.empty_like(order).scatter_(-1, order, position) + base
        return ranks if index is None else ranks.gather(-1, torch.as_tensor(index).long().unsqueeze(-1)).squeeze(-1)
    scores = np.asarray(scores)
    order = np.argsort(-scores.astype(np.int64) if scores.dtype.kind == "u" else -scores, axis=-1, kind="stable")
    position = np.broadcast_to(np.arange(scores.shape[-1]), order.shape)
    if ties == "shared":
        ordered = np.take_along_axis(scores, order, axis=-1)
        starts = np.ones(ordered.shape, dtype=bool)
        starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
        position = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    ranks = np.empty(order.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, position, axis=-1)
    ranks += base
    return ranks if index is None else np.take_along_axis(ranks, np.asarray(index)[..., None], axis=-1)[..., 0]


def unigram(ids: np.ndarray | torch.Tensor, vocab_size: int, pseudocount: float = 0.0) -> np.ndarray:
    """Character frequencies of a token-id array, float64 ``[vocab]`` summing to 1 (method.md §8:
    the train split's). ``pseudocount`` is added to every count first, so that a character absent
    from ``ids`` keeps a small probability (KL(model || unigram) stays finite)."""
    import torch
    ids = ids.cpu().numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
    if ids.size == 0:
        raise ValueError("unigram of an empty token array")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"token ids must lie in 0..{vocab_size - 1}, found {ids.min()}..{ids.max()}")
    if pseudocount < 0:
        raise ValueError(f"pseudocount must be >= 0, got {pseudocount}")
    counts = np.bincount(ids.ravel().astype(np.int64), minlength=vocab_size).astype(np.float64) + pseudocount
    return counts / counts.sum()


def kendall_tau(x, y) -> float:
    """Kendall's tau-b rank correlation of two equally long 1-D sequences (ties counted as
    scipy.stats.kendalltau does): 1 for the same order, -1 for the reverse. O(n^2) memory and time,
    meant for up to a few thousand items."""
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"kendall_tau needs sequences of equal length, got {x.size} and {y.size}")
    if x.size < 2:
        raise ValueError("kendall_tau needs at least two items")
    iu = np.triu_indices(x.size, k=1)
    dx = np.sign(x[:, None] - x[None, :])[iu]
    dy = np.sign(y[:, None] - y[None, :])[iu]
    n_x, n_y = np.count_nonzero(dx), np.count_nonzero(dy)  # pairs not tied in x, in y
    if n_x == 0 or n_y == 0:
        return float("nan")
    return float((dx * dy).sum() / np.sqrt(float(n_x) * float(n_y)))


# --- uncertainty: one definition each, for every family's verdicts -----------------------------------------


def describe(values) -> dict[str, float]:
    """Mean, std (over the values: ``ddof=0``), min, max and quartiles, rounded for JSON; ``{"n": 0}`` for no
    values."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return {"n": 0}
    q25, q50, q75 = np.percentile(v, [25, 50, 75])
    stats = {"mean": v.mean(), "std": v.std(), "min": v.min(), "max": v.max(), "q25": q25, "median": q50, "q75": q75}
    return {**{k: round(float(x), 6) for k, x in stats.items()}, "n": len(v)}


def standard_error(values: Array) -> float:
    """The standard error of the mean of ``values`` (1-D): the sample standard deviation (``ddof=1``) over
    sqrt(n), in the values' own precision (NumPy array or torch tensor); nan for fewer than two values."""
    n = len(values)
    if n < 2:
        return float("nan")
    if not isinstance(values, np.ndarray) and hasattr(values, "detach"):  # a torch tensor: its std is ddof=1
        return float(values.std() / math.sqrt(n))
    return float(np.asarray(values).std(ddof=1) / math.sqrt(n))


def standard_error_of(std: float, n: int) -> float:
    """The standard error of a mean reported as (std, n), as the metrics files record it: std / sqrt(n), n
    counted as at least 1."""
    return std / math.sqrt(max(n, 1))


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial share ``successes / n`` (95% by default); None for ``n = 0``
    (no share to bound)."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def paired_difference(a, b, level: float = 0.95) -> dict[str, float | int]:
    """The paired comparison of two sets of per-item values on the same items (``a[i]`` and ``b[i]`` of item i):
    :func:`mean_test` of the differences d = a - b against 0 (the paired t-test), as the mean difference, its
    standard error, the ``level`` interval and the two-sided p; one test gives all three, so the interval excludes
    0 exactly when p < 1 - level. Values rounded to 6 significant digits (signs kept: a bound just above 0 stays
    above it); ``n`` at least 2."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    if n < 2 or np.ndim(d) != 1:
        raise ValueError(f"a paired difference needs two 1-D arrays of the same items, at least 2 of them; got {n}")
    test = mean_test(d, null=0.0, level=1 - level)

    def r(x: float) -> float:
        return float(f"{x:.6g}")

    low, high = test["ci95"]
    return {"mean_difference": r(test["mean"]), "standard_error": r(test["se"]), "ci_low": r(low),
            "ci_high": r(high), "t": None if test["t"] is None else r(test["t"]), "p": r(test["p"]), "n": n,
            "level": level}


# --- tests whose verdict and numbers come from one record (tinylens.wording words them) ----------------------



def _direction(estimate: float, null: float, p: float | None, level: float = LEVEL) -> str:
    """``above``/``below`` the null when the test rejects it at ``level``, else ``same``."""
    if p is None or not math.isfinite(p) or p >= level:
        return "same"
    return "above" if estimate > null else "below"


def mean_test(values, null: float = 0.0, level: float = LEVEL) -> dict:
    """The one-sample t-test of the mean of ``values`` against ``null`` (on per-unit differences: the paired
    t-test): mean, standard error, n, the ``1 - level`` interval of the mean (t quantile, n - 1 degrees of
    freedom), t, the two-sided p, and ``direction`` (``above``/``below`` the null when p < level, else
    ``same``): the interval excludes the null exactly when p < level. Fewer than two values, or no spread
    with the mean at the null: p None, direction ``same``."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    n = len(v)
    out = {"test": "t", "n": n, "null": null, "mean": float(v.mean()) if n else None}
    if n < 2:
        return {**out, "se": None, "ci95": None, "t": None, "p": None, "direction": "same"}
    mean, se = float(v.mean()), standard_error(v)
    if se == 0:
        p = 1.0 if mean == null else 0.0
        return {**out, "se": 0.0, "ci95": [mean, mean], "t": None, "p": p, "direction": _direction(mean, null, p, level)}
    t = (mean - null) / se
    p = float(2 * stats.t.sf(abs(t), n - 1))
    half = float(stats.t.ppf(1 - level / 2, n - 1)) * se
    return {**out, "se": se, "ci95": [mean - half, mean + half], "t": t, "p": p,
            "direction": _direction(mean, null, p, level)}


def share_test(successes: int, n: int, null: float = 0.5, level: float = LEVEL) -> dict:
    """The sign test of a share ``successes / n`` against ``null``: the share, its Wilson interval, the score
    test's z and two-sided p (the Wilson interval is that test inverted, so it excludes the null exactly when
    p < level), and ``direction`` (``above``/``below``/``same``)."""
    from scipy import stats

    out = {"test": "sign", "successes": int(successes), "n": int(n), "null": null,
           "share": successes / n if n else None}
    if n == 0:
        return {**out, "ci95": None, "z": None, "p": None, "direction": "same"}
    z_level = float(stats.norm.ppf(1 - level / 2))
    z = (successes / n - null) / math.sqrt(null * (1 - null) / n)
    p = float(2 * stats.norm.sf(abs(z)))
    return {**out, "ci95": list(wilson_interval(successes, n, z_level)), "z": z, "p": p,
            "direction": _direction(successes / n, null, p, level)}


def ratio_test(numerators, denominators, null: float, draws: int = 2000, seed: int = 0,
               level: float = LEVEL) -> dict:
    """A share of a total, ``sum(numerators) / sum(denominators)`` over units (features, prompts), against
    ``null``, by the bootstrap over units: the ratio, the percentile ``1 - level`` interval of ``draws``
    resamples, the two-sided bootstrap p (twice the smaller share of resamples on either side of the null, counted
    as (k + 1) / (draws + 1), so the interval excludes the null when p < level, up to one resample) and
    ``direction``."""
    num, den = np.asarray(numerators, dtype=np.float64), np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape or num.ndim != 1:
        raise ValueError(f"numerators and denominators must be 1-D of one length, got {num.shape} and {den.shape}")
    out = {"test": "bootstrap", "units": len(num), "draws": draws, "null": null}
    if len(num) == 0 or den.sum() <= 0:
        return {**out, "ratio": None, "ci95": None, "p": None, "direction": "same"}
    ratio = float(num.sum() / den.sum())
    pick = np.random.default_rng(seed).integers(0, len(num), size=(draws, len(num)))
    sums = den[pick].sum(1)
    boot = np.where(sums > 0, num[pick].sum(1) / np.where(sums > 0, sums, 1.0), np.nan)
    boot = boot[np.isfinite(boot)]
    lo, hi = (float(x) for x in np.percentile(boot, [100 * level / 2, 100 * (1 - level / 2)]))
    # (k + 1) / (draws + 1) on each side: never 0, however far the null lies outside every resample
    p = float(min(1.0, 2 * (min(np.sum(boot <= null), np.sum(boot >= null)) + 1) / (len(boot) + 1)))
    return {**out, "ratio": ratio, "ci95": [lo, hi], "p": p, "direction": _direction(ratio, null, p, level)}
