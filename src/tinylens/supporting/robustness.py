"""Robustness of the approximation (method.md §7, "Robustness of the approximation").

The approximation of method.md §5 with one choice changed at a time: Euclidean distance instead of
cosine similarity, or strings (and prompts) of another length than ``substring_length``. Every
variant is searched over the same strings (those of a slice of the train text), tuned by the same
coordinate descent (:func:`tinylens.core.approx.tune`) on the same tuning prompts, and evaluated on the same
evaluation prompts, so each variant's per-prompt Hellinger distances pair with the default's.

A threshold is an index into a grid of ``count`` edges on a similarity *score* (larger = more alike):
the cosine itself, or minus the Euclidean distance. A string matches at index k when its score exceeds
edge k (:func:`above_counts`). The cosine grid is the configured ``threshold_grid``; the Euclidean grid
is the equivalent one (:func:`euclidean_edges`): per block, radius k lets through the same share of
the tuning (prompt, string) pairs as cosine edge k does, so both distances offer the tuner the same
range of selectivities with the same number of steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tinylens.core.approx import split_masks, tune_and_evaluate
from tinylens.measures import mean_test, standard_error
from tinylens.wording import get, num, stated

#: Similarity measures of the variants.
SIMILARITIES = ("cosine", "euclidean")


@dataclass(frozen=True)
class RobustnessSettings:
    """``supporting.robustness`` (shared) and the preset's ``supporting.robustness`` sizes."""

    lengths: Sequence[int]  # string lengths besides the default, searched with cosine similarity
    seed: int  # seed of the prompt positions
    text_chars: int  # the searched strings are those of the first text_chars characters of the train text
    prompts: int  # prompt positions in the validation text (tune and eval, split by tune_fraction)


def variant_name(similarity: str, length: int) -> str:
    return f"{similarity}_len{length}"


def variants(default_length: int, lengths: Sequence[int]) -> list[tuple[str, str, int]]:
    """``(name, similarity, length)``: the default first, then Euclidean at the default length, then cosine
    at each other length."""
    rows = [("cosine", default_length), ("euclidean", default_length)]
    rows += [("cosine", n) for n in sorted(set(lengths)) if n != default_length]
    return [(variant_name(s, n), s, n) for s, n in rows]


def prompt_positions(n_val: int, max_length: int, n_prompts: int, tune_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """End positions (exclusive) in the validation text and their split.

    The validation text is cut at ``tune_fraction`` of its length, as for the held-out prompts: a tuning
    prompt's longest window ``[end - max_length, end)`` lies wholly before the cut, an evaluation
    prompt's wholly after it. ``round(tune_fraction * n_prompts)`` tuning ends, the rest evaluation
    ends, drawn without replacement by one seeded generator. The prompt of length n at ``end`` is
    ``val[end - n:end]``: every length ends on the same character, so predicts the same next one."""
    cut = int(round(tune_fraction * n_val))
    tune_ends = np.arange(max_length, cut + 1)
    eval_ends = np.arange(cut + max_length, n_val + 1)
    n_tune = int(round(tune_fraction * n_prompts))
    if len(tune_ends) < n_tune or len(eval_ends) < n_prompts - n_tune:
        raise ValueError(f"the validation text ({n_val} characters) has too few windows of {max_length} for "
                         f"{n_prompts} prompts on each side of its cut at {cut}; lower supporting.robustness.prompts")
    rng = np.random.default_rng(seed)
    ends = np.concatenate([np.sort(rng.choice(tune_ends, n_tune, replace=False)),
                           np.sort(rng.choice(eval_ends, n_prompts - n_tune, replace=False))])
    return ends, np.array(["tune"] * n_tune + ["eval"] * (n_prompts - n_tune))


def windows(ids: np.ndarray, ends: np.ndarray, length: int) -> np.ndarray:
    """``[prompts length]`` token ids ``ids[end - length:end]``."""
    ends = np.asarray(ends)
    if (ends < length).any() or (ends > len(ids)).any():
        raise ValueError(f"a window of {length} tokens does not fit before every end position")
    return np.stack([ids[e - length:e] for e in ends])


def scores(prompts: np.ndarray, strings: np.ndarray, similarity: str) -> np.ndarray:
    """``[prompts strings]`` float64 similarity scores: the cosine, or minus the Euclidean distance
    (larger = more alike either way). A zero vector's cosine with anything is 0."""
    p, s = np.asarray(prompts, dtype=np.float64), np.asarray(strings, dtype=np.float64)
    dot = p @ s.T
    p2, s2 = (p * p).sum(1), (s * s).sum(1)
    if similarity == "cosine":
        norms = np.sqrt(p2)[:, None] * np.sqrt(s2)[None, :]
        return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)
    if similarity == "euclidean":
        return -np.sqrt(np.maximum(p2[:, None] + s2[None, :] - 2 * dot, 0.0))
    raise ValueError(f"similarity must be one of {SIMILARITIES}, not {similarity!r}")


def euclidean_edges(cosine: np.ndarray, distance_scores: np.ndarray, cosine_edges: np.ndarray) -> np.ndarray:
    """The Euclidean score edges equivalent to ``cosine_edges`` on one block.

    ``cosine``, ``distance_scores``: the scores of the same (tuning prompt, string) pairs (any shape).
    Edge k is placed so that exactly as many pairs have ``-distance > edge_k`` as have ``cos > cosine_edges[k]``
    (m pairs: halfway between the m-th and (m+1)-th largest score; ties at that point let them all through
    or none). Non-decreasing, as the cosine edges are."""
    c = np.asarray(cosine, dtype=np.float64).ravel()
    d = np.sort(np.asarray(distance_scores, dtype=np.float64).ravel())[::-1]  # most alike first
    out = np.empty(len(cosine_edges))
    for k, edge in enumerate(cosine_edges):
        m = int((c > edge).sum())
        if m == 0:
            out[k] = d[0] + 1.0  # nothing passes
        elif m == len(d):
            out[k] = d[-1] - 1.0  # everything passes
        else:
            out[k] = 0.5 * (d[m - 1] + d[m])
    return np.maximum.accumulate(out)


def above_counts(score: np.ndarray, edges: np.ndarray, token: np.ndarray, string: np.ndarray, count: np.ndarray,
                 vocab_size: int, chunk: int = 32) -> np.ndarray:
    """``[prompts n_edges vocab]``: per prompt and edge k, the summed next-token counts of the strings whose
    score exceeds ``edges[k]`` (non-decreasing edges).

    score: ``[prompts strings]``; the counts as entries (``string[e]`` is followed by ``token[e]``
    ``count[e]`` times). Each score is binned once (bin k: ``edges[k] < s <= edges[k+1]``), the counts
    summed per bin, then accumulated from the strictest bin down."""
    edges = np.asarray(edges, dtype=np.float64)
    n_prompts, n_edges = score.shape[0], len(edges)
    out = np.zeros((n_prompts, n_edges, vocab_size), dtype=np.float64)
    string, token, weight = np.asarray(string), np.asarray(token, dtype=np.int64), np.asarray(count, dtype=np.float64)
    for lo in range(0, n_prompts, chunk):
        part = score[lo:lo + chunk]
        bins = np.searchsorted(edges, part, side="left") - 1  # [p strings], -1 below every edge
        entry_bins = bins[:, string]  # [p entries]
        keep = entry_bins >= 0
        rows = np.broadcast_to(np.arange(len(part))[:, None], entry_bins.shape)
        idx = (rows[keep] * n_edges + entry_bins[keep]) * vocab_size + np.broadcast_to(token, entry_bins.shape)[keep]
        binned = np.bincount(idx, weights=np.broadcast_to(weight, entry_bins.shape)[keep],
                             minlength=len(part) * n_edges * vocab_size).reshape(len(part), n_edges, vocab_size)
        out[lo:lo + len(part)] = np.cumsum(binned[:, ::-1], axis=1)[:, ::-1]
    return out


def count_entries(next_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(string, token, count)`` of the nonzero entries of ``next_counts [strings vocab]``."""
    string, token = np.nonzero(np.asarray(next_counts))
    return string, token, np.asarray(next_counts)[string, token]


def paired_comparison(variant: np.ndarray, default: np.ndarray) -> dict:
    """A variant's per-prompt Hellinger distances against the default's on the same prompts.

    The difference d = H_variant - H_default per prompt, and one test of its mean: the paired t-test
    (:func:`tinylens.measures.mean_test`: mean, standard error, 95% interval, p), whose verdict is ``worse``
    when the interval lies above 0, ``better`` when below, else ``no different``. The Wilcoxon signed-rank p
    (two-sided; None when every difference is 0) is kept beside it for reference: it tests the differences'
    median, not their mean, and decides nothing."""
    d = np.asarray(variant, dtype=np.float64) - np.asarray(default, dtype=np.float64)
    n = len(d)
    if n < 2:
        raise ValueError(f"a paired comparison needs at least 2 prompts, got {n}")
    from scipy.stats import wilcoxon

    test = mean_test(d)
    wilcoxon_p = None if not np.any(d) else float(wilcoxon(d).pvalue)
    verdict = {"above": "worse", "below": "better", "same": "no different"}[test["direction"]]
    return {"mean_difference": round(test["mean"], 6), "standard_error": round(test["se"], 6), "n": n,
            "test": test, "verdict": verdict,
            "wilcoxon_p": None if wilcoxon_p is None else round(wilcoxon_p, 6)}


def summarize(hellingers: Mapping[str, np.ndarray], tuned: Mapping[str, Mapping], rows: Sequence[tuple[str, str, int]],
              edges: Mapping[str, Sequence[Sequence[float]]], settings: Mapping, n_strings: Mapping[int, int]) -> dict:
    """The robustness JSON: per variant its similarity, length, tuned setting (indices and the score edges
    they stand for), mean Hellinger on the evaluation prompts with its standard error, and the paired
    comparison with the default (the first row)."""
    default = rows[0][0]
    out = {"default": default, "settings": dict(settings), "variants": {}}
    for name, similarity, length in rows:
        h = np.asarray(hellingers[name], dtype=np.float64)
        entry = {"similarity": similarity, "length": length, "strings": int(n_strings[length]),
                 "mean_hellinger": round(float(h.mean()), 6),
                 "standard_error": round(standard_error(h), 6) if len(h) > 1 else None,
                 "n": len(h), **tuned[name],
                 "threshold_scores": [round(float(edges[name][b][k]), 6) for b, k in enumerate(tuned[name]["thresholds"])]}
        if name != default:
            entry["versus_default"] = paired_comparison(h, hellingers[default])
        out["variants"][name] = entry
    return out


def findings_sentence(robustness: Mapping) -> str:
    """The run's finding on the robustness of the approximation, from the robustness section: each variant's
    verdict with the paired t-test that decided it."""
    variants = get(robustness, "variants")
    default = get(variants, get(robustness, "default"))
    parts = []
    for v in variants.values():
        if "versus_default" not in v:
            continue
        what = ("Euclidean distance" if get(v, "similarity") == "euclidean"
                else f"strings of length {get(v, 'length')}")
        parts.append(f"with {what} it is " + stated(get(v, "versus_default", "test"), "worse", "better",
                                                     what="Hellinger difference"))
    s = get(robustness, "settings")
    return (f"Against the default approximation (cosine similarity, strings of length {get(default, 'length')}: mean "
            f"Hellinger {num(get(default, 'mean_hellinger'))} on {get(default, 'n')} held-out prompts, searching "
            f"the strings of the first {num(get(s, 'text_chars'))} characters of the train text), tuned the same way, "
            "paired over the same prompts (t-test of the mean difference): " + "; ".join(parts) + ".")


def unique_windows(ids: np.ndarray, length: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct windows of ``length`` tokens of ``ids`` ``[strings length]`` (sorted lexicographically by
    token id) and their next-token counts ``[strings vocab]`` (the window at the very end has none), as
    method.md §3 builds the strings (any length: windows are compared as byte rows, not int64 keys)."""
    ids = np.asarray(ids, dtype=np.int64)
    if vocab_size > 256:
        raise ValueError(f"a vocabulary of {vocab_size} tokens does not fit the byte rows of unique_windows")
    rows = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(ids.astype(np.uint8), length))
    _, first, inverse = np.unique(rows.view(np.dtype((np.void, length))).ravel(), return_index=True,
                                  return_inverse=True)
    inverse = inverse.ravel()
    starts = np.arange(len(rows))
    has_next = starts + length < len(ids)
    nxt = ids[np.minimum(starts + length, len(ids) - 1)]
    counts = np.bincount(inverse[has_next] * vocab_size + nxt[has_next],
                         minlength=len(first) * vocab_size).reshape(len(first), vocab_size)
    return rows[first].astype(np.int64), counts


def run_variants(model, train_ids: np.ndarray, val_ids: np.ndarray, default_length: int, settings: RobustnessSettings,
                 tune_fraction: float, grid: np.ndarray, init: np.ndarray, rounds: int, batch: int = 4096,
                 log=None) -> tuple[dict, dict[str, np.ndarray]]:
    """Every variant on the same prompts: returns the robustness JSON of :func:`summarize` and the per-prompt
    columns of the evaluation prompts (:func:`tinylens.supporting.schemas.robustness_schema`). ``model``: the original model (eval mode);
    ``grid``: the cosine threshold edges; ``init``: the initial threshold indices of the tuning."""
    import torch

    from tinylens.core.activations import last_position

    vocab = model.config.vocab_size
    rows = variants(default_length, settings.lengths)
    lengths = sorted({n for _, _, n in rows})
    if max(lengths) > model.config.block_size:
        raise ValueError(f"string length {max(lengths)} exceeds the model's context ({model.config.block_size}): "
                         "lower supporting.robustness.lengths")
    text = np.asarray(train_ids[:settings.text_chars])
    ends, splits = prompt_positions(len(val_ids), max(lengths), settings.prompts, tune_fraction, settings.seed)
    tune_mask = split_masks(splits)["tune"]
    hellingers, tuned, edges, n_strings = {}, {}, {}, {}
    for length in lengths:
        strings, counts = unique_windows(text, length, vocab)
        n_strings[length] = len(strings)
        with torch.no_grad():
            _, string_blocks = last_position(model, torch.from_numpy(strings), ["ffwd_out"], batch)
            logits, prompt_blocks = last_position(model, torch.from_numpy(windows(val_ids, ends, length).astype(np.int64)),
                                                  ["ffwd_out"], batch)
        q = torch.softmax(torch.from_numpy(logits).double(), -1).numpy()
        entries = count_entries(counts)
        here = [(name, similarity) for name, similarity, n in rows if n == length]
        above = {name: [] for name, _ in here}
        for name, _ in here:
            edges[name] = []
        for b, block in enumerate(string_blocks):  # one block's scores at a time: [prompts strings] float64
            prompts_b, strings_b = prompt_blocks[b]["ffwd_out"], block["ffwd_out"]
            cos = scores(prompts_b, strings_b, "cosine")
            for name, similarity in here:
                if similarity == "cosine":
                    score, e = cos, np.asarray(grid, dtype=np.float64)
                else:
                    score = scores(prompts_b, strings_b, similarity)
                    e = euclidean_edges(cos[tune_mask], score[tune_mask], grid)
                above[name].append(above_counts(score, e, entries[1], entries[0], entries[2], vocab))
                edges[name].append(e)
        for name, _ in here:
            tuned[name], hellingers[name] = tune_and_evaluate(np.stack(above[name], axis=1), q, splits, init, rounds)
            if log:
                log(f"{name}: {len(strings)} strings, mean Hellinger {hellingers[name].mean():.4f}")
    summary = summarize(hellingers, tuned, rows, edges, {**vars(settings), "lengths": list(settings.lengths),
                                                         "tune_fraction": tune_fraction}, n_strings)
    on_eval = split_masks(splits)["eval"]
    columns = {"end": ends[on_eval].astype(np.int64), **{f"hellinger_{name}": hellingers[name] for name, _, _ in rows}}
    return summary, columns
