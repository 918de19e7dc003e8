"""Exact cosine-similarity search, streamed, summarised by threshold bin (method.md §5).

For every prompt and block, the strings whose cosine similarity with the
prompt exceeds a threshold. Tuning and evaluation only need, per prompt,
block and threshold, the number of matching strings and the sum of their
next-token counts, so that is all this keeps: similarities fall into bins
``(edge_k, edge_k+1]`` of a grid from 0.70 upward (the last bin is open), and
"cos > edge_k" is the sum of bins ``k`` and above.

Exactness: similarities are screened in float32 on unit vectors, one
(prompt chunk x string chunk) tile at a time, so the dense prompts x strings
matrix never exists. Any pair whose float32 cosine lies within a rounding
margin of a bin edge is recomputed in float64 from the stored activations,
so every bin assignment equals the float64 computation
``(p . s) / (|p| |s|)`` of :func:`search_block_bruteforce`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import torch
from tqdm.auto import tqdm

from tinylens.measures import cosine, cosine_matrix
from tinylens.tables import Schema


def threshold_edges(start: float, step: float, count: int) -> np.ndarray:
    """Bin edges ``start, start+step, ...`` (rounded, so 0.95 is the float 0.95)."""
    return np.round(start + step * np.arange(count), 10)


def summary_schema(n_bins: int, vocab_size: int) -> Schema:
    return Schema("search summary", {
        "prompt_id": pa.int32(),
        "block": pa.int8(),
        "bin_matches": pa.list_(pa.uint32(), n_bins),  # strings with cosine in each bin
        "bin_counts": pa.list_(pa.uint32(), n_bins * vocab_size),  # [bins vocab] summed next-token counts
    })


@dataclass(frozen=True)
class CountsCSR:
    """Sparse next-token counts: string i has tokens ``token[indptr[i]:indptr[i+1]]`` with ``count[...]``."""

    indptr: np.ndarray
    token: np.ndarray
    count: np.ndarray
    vocab_size: int

    @classmethod
    def from_dense(cls, counts: np.ndarray, members: np.ndarray | None = None) -> CountsCSR:
        """``members``: strings outside the searched set get no counts."""
        counts = np.asarray(counts)
        if members is not None:
            counts = counts * members[:, None]
        rows, cols = np.nonzero(counts)
        indptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(counts)), out=indptr[1:])
        return cls(indptr, cols.astype(np.int64), counts[rows, cols].astype(np.int64), counts.shape[1])


def rounding_margin(d_model: int) -> float:
    """Bound on |float32 cosine of unit vectors - exact cosine|: d u for the dot product
    plus a few u for normalising, u = 2**-24; doubled for safety."""
    return 2 * (d_model + 4) * 2.0**-24


def _unit_float32(x: np.ndarray, chunk: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """(float32 unit vectors, float64 norms) of the rows of ``x``; zero rows stay zero.
    Chunked, so no float64 copy of the whole matrix is ever made."""
    norms = np.empty(len(x), dtype=np.float64)
    unit = np.empty(x.shape, dtype=np.float32)
    for i in range(0, len(x), chunk):
        part = x[i : i + chunk]
        n = np.sqrt(np.einsum("ij,ij->i", part, part, dtype=np.float64))
        norms[i : i + chunk] = n
        # float32 scaling: a few ulps of error, inside rounding_margin's allowance for normalising
        np.multiply(part, (1.0 / np.where(n > 0, n, 1.0)).astype(np.float32)[:, None], out=unit[i : i + chunk])
    return unit, norms


def exact_cosines(prompts: np.ndarray, p_norms: np.ndarray, strings: np.ndarray, s_norms: np.ndarray,
                  pi: np.ndarray, si: np.ndarray) -> np.ndarray:
    """float64 ``(p . s) / (|p| |s|)`` for the pairs (pi, si); 0 where a vector is zero."""
    # tinylens.measures.cosine, the one definition (the norms are recomputed from the same rows).
    # Clipped: a vector's cosine with itself is 1 up to an ulp either way, and must land in one bin.
    return np.clip(cosine(prompts[pi], strings[si]), -1.0, 1.0)


def _bins(cos: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin k for cos in (edges[k], edges[k+1]], -1 at or below edges[0]."""
    return np.searchsorted(edges, cos, side="left") - 1


@numba.njit(parallel=True, cache=True)
def _bin_tile(cos, screen, start, inv_step, margin_bins, s0, indptr, token, count,
              matches, summed, border_cols, border_n):  # pragma: no cover - compiled
    """One pass over a similarity tile [rows width]: every pair above ``screen`` is binned and its
    string's next-token counts added to ``summed[row, bin]``; pairs within ``margin_bins`` of an edge
    are only recorded (``border_cols[row, :border_n[row]]``) for the float64 re-check."""
    rows, width = cos.shape
    n_bins = matches.shape[1]
    for r in numba.prange(rows):
        n_border = 0
        for j in range(width):
            c = cos[r, j]
            if c > screen:  # NaN (strings outside the set) compares false
                u = (np.float64(c) - start) * inv_step  # position on the edge grid, in bins
                if abs(u - np.floor(u + 0.5)) <= margin_bins:
                    border_cols[r, n_border] = j
                    n_border += 1
                    continue
                k = int(np.ceil(u)) - 1  # bin (edge_k, edge_k+1]
                if k < 0:
                    continue
                if k >= n_bins:
                    k = n_bins - 1
                matches[r, k] += 1
                s = s0 + j
                for e in range(indptr[s], indptr[s + 1]):
                    summed[r, k, token[e]] += count[e]
        border_n[r] = n_border


@numba.njit(cache=True)
def _add_pairs(rows, cols, bins, indptr, token, count, matches, summed):  # pragma: no cover - compiled
    for i in range(len(rows)):
        k = bins[i]
        if k < 0:
            continue
        matches[rows[i], k] += 1
        for e in range(indptr[cols[i]], indptr[cols[i] + 1]):
            summed[rows[i], k, token[e]] += count[e]


def search_block(prompts: np.ndarray, strings: np.ndarray, counts: CountsCSR, edges: np.ndarray,
                 members: np.ndarray | None = None, prompt_chunk: int = 256, string_chunk: int = 32768,
                 progress: bool = False, desc: str = "search") -> tuple[np.ndarray, np.ndarray]:
    """Binned matches of every prompt against every string, for one block.

    prompts: [n_prompts d_model], strings: [n_strings d_model] (float32 activations);
    ``edges`` must be a uniform grid (:func:`threshold_edges`). Threads: torch's (the matmul) and numba's
    (the binning pass) as the caller set them (``torch.set_num_threads``, ``numba.set_num_threads``).
    Returns ``(bin_matches [n_prompts n_bins], bin_counts [n_prompts n_bins vocab])``, int64.
    """
    n_p, n_s, n_bins, vocab = len(prompts), len(strings), len(edges), counts.vocab_size
    edges64 = np.asarray(edges, dtype=np.float64)
    start, step = float(edges64[0]), float(edges64[1] - edges64[0]) if n_bins > 1 else 1.0
    if n_bins > 1 and not np.allclose(np.diff(edges64), step, rtol=0, atol=1e-12):
        raise ValueError("threshold edges must be a uniform grid")
    margin = rounding_margin(prompts.shape[1])
    p_unit, p_norms = _unit_float32(prompts)
    s_unit, s_norms = _unit_float32(strings)
    if members is not None:
        # NaN compares false with any edge: strings outside the set never pass the screen.
        s_unit[~np.asarray(members, dtype=bool)] = np.nan
    s_unit_t = torch.from_numpy(s_unit)
    matches = np.zeros((n_p, n_bins), dtype=np.int64)
    summed = np.zeros((n_p, n_bins, vocab), dtype=np.int64)
    border_cols = np.empty((min(prompt_chunk, n_p), min(string_chunk, n_s)), dtype=np.int64)
    border_n = np.empty(min(prompt_chunk, n_p), dtype=np.int64)
    tiles = [(p0, s0) for p0 in range(0, n_p, prompt_chunk) for s0 in range(0, n_s, string_chunk)]
    for p0, s0 in tqdm(tiles, disable=not progress, desc=desc, unit="tile", mininterval=5):
        p_tile = torch.from_numpy(p_unit[p0 : p0 + prompt_chunk])
        cos32 = (p_tile @ s_unit_t[s0 : s0 + string_chunk].T).numpy()  # [prompt_chunk string_chunk]
        rows = len(cos32)
        _bin_tile(cos32, start - margin, start, 1.0 / step, margin / step + 1e-6, s0, counts.indptr, counts.token,
                  counts.count, matches[p0 : p0 + rows], summed[p0 : p0 + rows], border_cols, border_n)
        if border_n[:rows].any():  # pairs near an edge: bin by their exact float64 cosine
            pi = np.repeat(np.arange(rows), border_n[:rows])
            sj = np.concatenate([border_cols[r, : border_n[r]] for r in range(rows)]) + s0
            exact = exact_cosines(prompts, p_norms, strings, s_norms, pi + p0, sj)
            _add_pairs(pi, sj, _bins(exact, edges64), counts.indptr, counts.token, counts.count,
                       matches[p0 : p0 + rows], summed[p0 : p0 + rows])
    return matches, summed


def search_block_bruteforce(prompts: np.ndarray, strings: np.ndarray, counts: np.ndarray, edges: np.ndarray,
                            members: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reference: the dense float64 cosine matrix, binned. Same outputs as :func:`search_block`.

    Memory is O(n_prompts x n_strings): for tests, verification samples and small slices.
    """
    cos = np.clip(cosine_matrix(prompts, strings), -1.0, 1.0)  # tinylens.measures: the one definition
    k = _bins(cos, np.asarray(edges, dtype=np.float64))  # [prompts strings]
    if members is not None:
        k[:, ~members] = -1
    counts64 = np.asarray(counts, dtype=np.float64)  # integer sums below 2**53 are exact
    matches = np.zeros((len(prompts), len(edges)), dtype=np.int64)
    summed = np.zeros((len(prompts), len(edges), counts64.shape[1]), dtype=np.int64)
    for b in range(len(edges)):  # one bin at a time keeps memory at one [prompts strings] matrix
        in_bin = (k == b).astype(np.float64)
        matches[:, b] = in_bin.sum(axis=1)
        summed[:, b] = np.rint(in_bin @ counts64).astype(np.int64)
    return matches, summed


def cumulative(binned: np.ndarray, axis: int) -> np.ndarray:
    """From per-bin values to "above edge k" values: reverse cumulative sum along ``axis``."""
    return np.flip(np.cumsum(np.flip(binned, axis=axis), axis=axis), axis=axis)


def search_prompts(prompt_blocks: Sequence[np.ndarray], string_blocks, counts: CountsCSR, edges: np.ndarray,
                   members: np.ndarray | None = None, progress: bool = True, **chunks) -> tuple[np.ndarray, np.ndarray]:
    """All blocks: ``string_blocks`` is a callable ``block -> [n_strings d_model]`` array, so only one
    block's strings are in memory at a time. Returns ``(matches [prompts blocks bins],
    counts [prompts blocks bins vocab])``."""
    results = [search_block(p, string_blocks(b), counts, edges, members, progress=progress,
                            desc=f"block {b}", **chunks) for b, p in enumerate(prompt_blocks)]
    return np.stack([r[0] for r in results], axis=1), np.stack([r[1] for r in results], axis=1)


def write_summary(path, prompt_ids: np.ndarray, matches: np.ndarray, counts: np.ndarray) -> None:
    """One row per (prompt, block). matches: [prompts blocks bins], counts: [prompts blocks bins vocab]."""
    from tinylens.tables import write_table

    n_p, n_b, n_bins, vocab = counts.shape
    if counts.max(initial=0) >= 2**32 or matches.max(initial=0) >= 2**32:
        raise OverflowError("binned counts exceed uint32")
    write_table(path, summary_schema(n_bins, vocab), {
        "prompt_id": np.repeat(np.asarray(prompt_ids, dtype=np.int32), n_b),
        "block": np.tile(np.arange(n_b, dtype=np.int8), n_p),
        "bin_matches": matches.reshape(n_p * n_b, n_bins).astype(np.uint32),
        "bin_counts": counts.reshape(n_p * n_b, n_bins * vocab).astype(np.uint32),
    })


def load_summary(paths: Sequence, n_blocks: int, n_bins: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read search summaries (one per shard, or the gathered one) back into
    ``(prompt_ids [P], matches [P blocks bins], counts [P blocks bins vocab])``, sorted by prompt."""
    from tinylens.tables import fixed_list_to_numpy, read_table

    schema = summary_schema(n_bins, vocab_size)
    tables = [read_table(p, schema) for p in paths]
    ids = np.concatenate([t["prompt_id"].to_numpy() for t in tables])
    blocks = np.concatenate([t["block"].to_numpy() for t in tables]).astype(np.int64)
    matches = np.concatenate([fixed_list_to_numpy(t["bin_matches"]) for t in tables])
    counts = np.concatenate([fixed_list_to_numpy(t["bin_counts"]) for t in tables])
    order = np.lexsort((blocks, ids))
    ids, blocks = ids[order], blocks[order]
    prompt_ids = ids[::n_blocks]
    if len(ids) != len(prompt_ids) * n_blocks or not np.array_equal(blocks, np.tile(np.arange(n_blocks), len(prompt_ids))):
        raise ValueError(f"search summary {paths} does not hold all {n_blocks} blocks for every prompt; "
                         "rerun the search (snakemake --forcerun search_shard)")
    return (prompt_ids, matches[order].reshape(-1, n_blocks, n_bins).astype(np.int64),
            counts[order].reshape(-1, n_blocks, n_bins, vocab_size).astype(np.int64))
