"""The criterion ("aggregate performance", method.md §7): does a block's feed-forward output point
at the tokens its approximation predicts?

For a prompt and block ``b``:

1. ``p_b``: the approximation from block ``b`` alone at its tuned threshold
   (the summed next-token counts of the matching strings), truncated to the
   fewest tokens holding more than 99% of its mass. Not renormalised.
2. ``top_n``: the fewest tokens holding more than 90% of ``p_b``.
3. Rank every token ``t`` by ``|cos(v_t, ffwd_b)|`` (``v_t`` its learned
   subspace direction; the notebooks' choice), or by the signed cosine.
4. The criterion holds when every ``top_n`` token ranks within the first
   ``k = vocab // 2``.

Semantics pinned as the original code has them (method.md §7, §12): both
cut-offs are a strict ``>`` on the cumulative mass, so a prefix holding
exactly 90% (9 of 10 counts, common with small counts) is not enough; the
truncated distribution is not renormalised; tokens are ordered by
decreasing count, ties by token id. Masses are compared exactly, on the
integer counts: ``cum * den > num * total`` for a cut-off ``num / den``.

Chance level two ways: the exact ``C(k, n) / C(V, n)`` for random ranks,
averaged over the prompts' real ``n``; and a permutation null that shuffles
which token each real cosine belongs to within each prompt.

>>> prefix_length(np.array([5, 4, 1]), 0.9)  # 9/10 is not > 90%: all three
array(3)
>>> chance_exact(1, 65, 32)
0.49230769230769234
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tinylens.core.approx import grid_index, select_thresholds
from tinylens.core.search import cumulative
from tinylens.measures import cosine_matrix, descending_ranks

#: Subspace variants: ``end_of_model`` pairs every block with the subspaces at the input of ln_f;
#: ``same_stage`` pairs block b with the subspaces where block b's output lands (stage b + 1).
SUBSPACE_VARIANTS = ("end_of_model", "same_stage")


def _fraction(mass: float) -> Fraction:
    """The cut-off as an exact fraction: 0.9 -> 9/10 (not the binary float nearest 0.9)."""
    return Fraction(repr(float(mass))).limit_denominator(10**9)


def descending_order(counts: np.ndarray) -> np.ndarray:
    """Token order by decreasing count, ties by token id: ``[... vocab]`` indices."""
    counts = np.asarray(counts)
    if counts.dtype.kind == "u":  # the search summary's uint32 would wrap around when negated
        counts = counts.astype(np.int64)
    return np.argsort(-counts, axis=-1, kind="stable")


def prefix_length(counts: np.ndarray, mass: float, total: np.ndarray | None = None) -> np.ndarray:
    """The fewest tokens (in :func:`descending_order`) whose counts sum to more than ``mass`` of
    ``total`` (default: the counts' own sum), strictly; 0 where the total is 0.

    counts: ``[... vocab]`` non-negative integers -> ``[...]`` int64.
    """
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        raise TypeError("prefix_length works on integer counts, so the cut-off comparison is exact")
    frac = _fraction(mass)
    ordered = np.take_along_axis(counts.astype(np.int64), descending_order(counts), axis=-1)
    cum = np.cumsum(ordered, axis=-1)
    total = cum[..., -1] if total is None else np.asarray(total, dtype=np.int64)
    # Strict: cum / total > num / den  <=>  cum * den > num * total (exact in integers).
    over = cum * frac.denominator > frac.numerator * total[..., None]
    n = np.argmax(over, axis=-1) + 1
    return np.where(over.any(axis=-1), n, 0)


def truncate(counts: np.ndarray, mass: float = 0.99) -> np.ndarray:
    """``counts`` with every token outside the fewest holding more than ``mass`` set to 0 (kept
    counts unchanged: the result is not renormalised)."""
    counts = np.asarray(counts)
    n = prefix_length(counts, mass)
    order = descending_order(counts)
    keep_sorted = np.arange(counts.shape[-1]) < n[..., None]
    keep = np.zeros(counts.shape, dtype=bool)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, counts, 0)


def top_tokens(counts: np.ndarray, truncate_mass: float = 0.99, top_mass: float = 0.9) -> np.ndarray:
    """Mask ``[... vocab]`` of the ``top_n`` tokens: the fewest holding more than ``top_mass`` of the
    distribution truncated at ``truncate_mass``, not renormalised (the mass is relative to the
    untruncated total)."""
    counts = np.asarray(counts)
    truncated = truncate(counts, truncate_mass)
    n = prefix_length(truncated, top_mass, total=counts.sum(axis=-1))
    order = descending_order(truncated)
    mask = np.zeros(counts.shape, dtype=bool)
    np.put_along_axis(mask, order, np.arange(counts.shape[-1]) < n[..., None], axis=-1)
    return mask


def holds(top: np.ndarray, rank: np.ndarray, k: int) -> np.ndarray:
    """The criterion: every top token ranks within the first ``k``. ``[... vocab]`` -> ``[...]``.
    A prompt with no top token (an empty approximation) never holds; callers leave it out."""
    return top.any(axis=-1) & np.all(~top | (rank < k), axis=-1)


def subspace_scores(ffwd: np.ndarray, directions: np.ndarray, signed: bool) -> np.ndarray:
    """``cos(v_t, ffwd)`` for every prompt and token: ``[prompt vocab]``; ``|cos|`` unless ``signed``."""
    cos = cosine_matrix(ffwd, directions)
    return cos if signed else np.abs(cos)


def chance_exact(n: int, vocab: int, k: int) -> float:
    """P(all ``n`` top tokens rank within the first ``k`` of ``vocab``) under uniformly random ranks:
    ``C(k, n) / C(vocab, n)``."""
    return math.comb(k, n) / math.comb(vocab, n)


def permutation_null(top: np.ndarray, rank: np.ndarray, k: int, permutations: int, seed: int,
                     chunk: int = 16) -> np.ndarray:
    """Share of prompts meeting the criterion when, within each prompt, the real cosines are
    shuffled over the tokens: ``[permutations]``.

    Shuffling which token each cosine belongs to gives token ``t`` the rank that token ``perm[t]``
    has, so a permuted rank is a gather of the real ranks. top, rank: ``[prompt vocab]``.
    """
    rng = np.random.default_rng(seed)
    n_prompts, vocab = top.shape
    shares = np.empty(permutations)
    for lo in range(0, permutations, chunk):
        m = min(chunk, permutations - lo)
        perm = np.argsort(rng.random((m, n_prompts, vocab)), axis=-1)  # an independent permutation per prompt
        permuted = np.take_along_axis(np.broadcast_to(rank, (m, n_prompts, vocab)), perm, axis=-1)
        shares[lo : lo + m] = holds(top[None], permuted, k).mean(axis=-1) if n_prompts else np.nan
    return shares


def evaluate_block(counts: np.ndarray, ffwd: np.ndarray, directions: np.ndarray, k: int, truncate_mass: float,
                   top_mass: float, converged: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The criterion for one block and one set of subspaces, per prompt.

    counts: ``[prompt vocab]`` the block-alone approximation (integer counts); ffwd: ``[prompt d_model]``;
    directions: ``[vocab d_model]``; converged: ``[vocab]`` whose subspace converged (default: all).
    Returns ``empty``, ``unconverged`` (a top token's subspace did not converge: left out of the rates),
    ``top`` (mask), ``top_n``, ``rank_abs``, ``rank_signed``, ``holds_abs``, ``holds_signed``.
    """
    counts = np.asarray(counts)
    top = top_tokens(counts, truncate_mass, top_mass)
    ok = np.ones(counts.shape[-1], dtype=bool) if converged is None else np.asarray(converged, dtype=bool)
    out = {"empty": counts.sum(axis=-1) == 0, "unconverged": (top & ~ok).any(axis=-1), "top": top,
           "top_n": top.sum(axis=-1)}
    for name, signed in (("abs", False), ("signed", True)):
        rank = descending_ranks(subspace_scores(ffwd, directions, signed), base=0, ties="by_position")
        out[f"rank_{name}"] = rank
        out[f"holds_{name}"] = holds(top, rank, k)
    return out


def summarize_block(result: dict[str, np.ndarray], vocab: int, k: int, permutations: int, seed: int) -> dict:
    """Rates over the non-empty prompts whose top tokens' subspaces all converged, in percent, with the
    chance level both ways."""
    unconverged = result.get("unconverged", np.zeros_like(result["empty"]))
    use = ~result["empty"] & ~unconverged
    n = result["top_n"][use]
    out = {"prompts": int(len(use)), "empty": int(result["empty"].sum()),
           "excluded_unconverged": int((unconverged & ~result["empty"]).sum()), "used": int(use.sum())}
    if not use.any():
        return out
    out["top_n"] = {"mean": round(float(n.mean()), 4),
                    "counts": {str(int(v)): int(c) for v, c in zip(*np.unique(n, return_counts=True))}}
    out["chance_exact"] = round(100 * float(np.mean([chance_exact(int(x), vocab, k) for x in n])), 4)
    for name in ("abs", "signed"):
        out[f"rate_{name}"] = round(100 * float(result[f"holds_{name}"][use].mean()), 4)
        null = permutation_null(result["top"][use], result[f"rank_{name}"][use], k, permutations, seed)
        out[f"permutation_null_{name}"] = {"mean": round(100 * float(null.mean()), 4),
                                           "std": round(100 * float(null.std()), 4)}
    return out


def stage_for(block: int, variant: str, n_layer: int, stages) -> int | None:
    """The stage whose subspaces rank block ``block``'s feed-forward output, or None where that
    stage was not learned: ``end_of_model`` -> the input of ln_f; ``same_stage`` -> stage
    ``block + 1`` (where block ``block``'s output lands)."""
    if variant not in SUBSPACE_VARIANTS:
        raise ValueError(f"unknown subspace variant {variant!r}; choose from {SUBSPACE_VARIANTS}")
    stage = n_layer if variant == "end_of_model" else block + 1
    return stage if stage in set(stages) else None


@dataclass(frozen=True)
class CriterionSettings:
    """The criterion's two cut-offs and its permutation null (config key ``supporting.criterion``)."""

    truncate_mass: float  # the block-alone approximation is cut to the fewest tokens holding > this
    top_mass: float  # top_n: the fewest tokens holding > this of the cut approximation
    permutations: int  # permutation-null draws
    seed: int  # seed of those draws
    aligned_prompts: tuple[int, ...] = ()  # prompt ids whose aligned subspaces are listed per block
    aligned_top: int = 5  # tokens listed per block


def block_alone_counts(binned: np.ndarray, thresholds: Sequence[float], edges: np.ndarray) -> np.ndarray:
    """Each block alone at its threshold: the summed next-token counts of the strings above it, ``[prompts blocks
    vocab]``, from the search's per-bin counts ``[prompts blocks bins vocab]`` and each block's threshold (a value
    on the ``edges`` grid)."""
    return select_thresholds(cumulative(binned, axis=2), grid_index(thresholds, edges))


def subspace_arrays(subspaces: dict[int, dict[str, np.ndarray]]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Each stage's loaded subspace tensors (:func:`tinylens.supporting.inputs.load_subspaces`) ->
    ``(directions, converged)``: stage -> ``[vocab d_model]`` float64, stage -> ``[vocab]`` bool."""
    return ({s: t["direction"].astype(np.float64) for s, t in subspaces.items()},
            {s: np.asarray(t["converged"]) > 0.5 for s, t in subspaces.items()})


def aligned_subspaces(ffwd: Sequence[np.ndarray], directions: np.ndarray, vocab: Sequence[str], top: int,
                      converged: np.ndarray | None = None) -> list[list[dict]]:
    """For one prompt, per block, the ``top`` tokens whose subspace its feed-forward output aligns with
    most, by ``|cos(v_t, ffwd_b)|`` (the paper's per-query lists): ``[{"token", "cosine", "rank",
    "converged"}, ...]`` per block. ffwd: per block ``[d_model]``; directions: ``[vocab d_model]``."""
    ok = np.ones(len(vocab), dtype=bool) if converged is None else np.asarray(converged, dtype=bool)
    out = []
    for f in ffwd:
        cos = cosine_matrix(np.asarray(f, dtype=np.float64)[None], directions)[0]
        order = np.argsort(-np.abs(cos), kind="stable")[:top]
        out.append([{"token": vocab[t], "cosine": round(float(cos[t]), 6), "rank": i + 1, "converged": bool(ok[t])}
                    for i, t in enumerate(order)])
    return out


def aligned_for_prompts(wanted: Sequence[int], prompt_ids: np.ndarray, strings: Sequence[str],
                        ffwd: Sequence[np.ndarray], directions: np.ndarray, vocab: Sequence[str], top: int,
                        converged: np.ndarray | None = None) -> dict[str, dict]:
    """:func:`aligned_subspaces` of each ``wanted`` prompt id present among ``prompt_ids`` (rows of
    ``strings`` and of each block's ``ffwd`` ``[prompt d_model]``): ``{id: {"string", "blocks"}}``."""
    out = {}
    for pid in wanted:
        rows = np.flatnonzero(np.asarray(prompt_ids) == pid)
        if len(rows):
            out[str(pid)] = {"string": strings[rows[0]],
                             "blocks": aligned_subspaces([f[rows[0]] for f in ffwd], directions, vocab, top, converged)}
    return out


def aligned_end_of_model(settings: CriterionSettings, prompt_ids: np.ndarray, strings: Sequence[str],
                         ffwd: Sequence[np.ndarray], directions: dict[int, np.ndarray], vocab: Sequence[str],
                         converged: dict[int, np.ndarray]) -> dict[str, dict]:
    """:func:`aligned_for_prompts` of ``settings.aligned_prompts`` with the end-of-model subspaces (the last
    learned stage, the input of ln_f, as the paper's lists use); directions, converged: stage -> as in
    :func:`criterion_by_block`."""
    end = max(directions)
    return aligned_for_prompts(settings.aligned_prompts, prompt_ids, strings, ffwd, directions[end], vocab,
                               settings.aligned_top, converged[end])


def criterion_by_block(alone: np.ndarray, ffwd: list[np.ndarray], directions: dict[int, np.ndarray],
                       prompt_ids: np.ndarray, vocab: Sequence[str], k: int, settings: CriterionSettings,
                       converged: dict[int, np.ndarray] | None = None,
                       variants: Sequence[str] = SUBSPACE_VARIANTS) -> tuple[dict[str, list], dict[str, dict]]:
    """The criterion for every block and subspace variant (of ``variants``) whose stage was learned.

    alone: ``[prompt block vocab]`` each block's approximation alone (integer counts); ffwd: per block
    ``[prompt d_model]``; directions: stage -> ``[vocab d_model]``; converged: stage -> ``[vocab]`` whose
    subspace converged (default: all); vocab: the token characters.
    Returns the per-prompt rows (the columns of ``criterion_schema`` but ``mode``) and, per block
    (as text) and variant, :func:`summarize_block`'s rates with the stage used.
    """
    n_prompts, n_layer, n_vocab = alone.shape
    rows: dict[str, list] = {c: [] for c in ("prompt_id", "block", "subspaces", "stage", "empty", "unconverged",
                                             "top_n", "top_tokens", "holds_abs", "holds_signed")}
    blocks: dict[str, dict] = {}
    for b in range(n_layer):
        blocks[str(b)] = {}
        order = descending_order(alone[:, b])
        for variant in variants:
            stage = stage_for(b, variant, n_layer, directions)
            if stage is None:
                continue
            result = evaluate_block(alone[:, b], ffwd[b], directions[stage], k, settings.truncate_mass,
                                    settings.top_mass, None if converged is None else converged.get(stage))
            blocks[str(b)][variant] = {"stage": stage,
                                       **summarize_block(result, n_vocab, k, settings.permutations, settings.seed)}
            rows["prompt_id"] += list(prompt_ids)
            rows["block"] += [b] * n_prompts
            rows["subspaces"] += [variant] * n_prompts
            rows["stage"] += [stage] * n_prompts
            rows["empty"] += list(result["empty"])
            rows["unconverged"] += list(result["unconverged"])
            rows["top_n"] += list(result["top_n"])
            rows["top_tokens"] += ["".join(vocab[t] for t in order[i, : result["top_n"][i]])
                                   for i in range(n_prompts)]
            rows["holds_abs"] += list(result["holds_abs"])
            rows["holds_signed"] += list(result["holds_signed"])
    return rows, blocks


def criterion_columns(rows: dict[str, list], mode: str) -> dict[str, object]:
    """:func:`criterion_by_block`'s rows of one prompt mode as the columns of ``criterion_schema``."""
    return {**rows, "mode": [mode] * len(rows["prompt_id"]), "block": np.asarray(rows["block"], dtype=np.int8),
            "stage": np.asarray(rows["stage"], dtype=np.int8), "top_n": np.asarray(rows["top_n"], dtype=np.int16)}


def criterion_summary(mode: str, k: int, vocab_size: int, settings: CriterionSettings, blocks: dict) -> dict:
    """The per-mode summary JSON: the settings the rates were computed with, then :func:`criterion_by_block`'s
    rates per block and variant."""
    return {"mode": mode, "k": k, "vocab": vocab_size, "truncate_mass": settings.truncate_mass,
            "top_mass": settings.top_mass, "permutations": settings.permutations, "blocks": blocks}
