"""Exact cosine-similarity search, streamed, summarised by threshold bin (method.md §5).

For every prompt and block, the strings whose cosine similarity with the
prompt exceeds a threshold. Tuning and evaluation only need, per prompt,
block and threshold, the number of matching strings and the sum of their
next-token counts, so that is all this keeps: similarities fall into bins
``(edge_k, edge_k+1]`` of a grid from 0.70 upward (the last bin is open), and
"cos > edge_k" is the sum of bins ``k`` and above.

How (:func:`search_block`): the prompts are scaled to float32 unit vectors once, the strings are
not copied. The prompts x strings matrix is never held: it is made one tile at a time (a float32
matrix multiply of the unit prompts and the raw string vectors), and every entry of the tile that can
exceed the lowest edge is binned and its string's next-token counts added to per-bin sums before the
next tile is made. An entry's cosine is its value times the string's float64 inverse norm.
Exactness: every tile value carries a proven error bound (:func:`rounding_margin`); an entry within
that bound of the lowest edge is a candidate, and a candidate within it of any edge is recomputed in
float64 from the stored activations, so every bin assignment equals the float64 computation
``(p . s) / (|p| |s|)`` of :func:`search_block_bruteforce`. Reduced-precision float32 matmuls (TF32
on a GPU, bf16 on a CPU) are switched off for the search (:func:`exact_float32_matmul`).

On a CPU each worker thread owns a set of prompt rows and loops over string chunks: a tile small
enough to stay in cache is multiplied (one thread) and then binned by one compiled pass (numba), so
the threads never share an accumulator. A tile row with few candidates is binned candidate by
candidate; a row where many entries match (the weakly trained models of short runs, whose
activations are much alike) entry by entry, without data-dependent branches (:func:`_bin_tile`).
Elsewhere (a GPU) the same tiles are binned with torch operations (:func:`_bin_tile_torch`), which
also run, and are tested, on a CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np
import torch
from tqdm.auto import tqdm

from tinylens.core.schemas import summary_schema
from tinylens.measures import cosine_matrix


def threshold_edges(start: float, step: float, count: int) -> np.ndarray:
    """Bin edges ``start, start+step, ...`` (rounded, so 0.95 is the float 0.95)."""
    return np.round(start + step * np.arange(count), 10)


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
        # int32: a count is at most the text's length; small arrays keep the search's lookups in cache
        return cls(indptr, cols.astype(np.int32), counts[rows, cols].astype(np.int32), counts.shape[1])

    def take(self, rows: np.ndarray) -> CountsCSR:
        """The counts of strings ``rows``, in that order."""
        nnz = self.indptr[rows + 1] - self.indptr[rows]
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(nnz, out=indptr[1:])
        entries = np.repeat(self.indptr[rows] - indptr[:-1], nnz) + np.arange(indptr[-1])
        return CountsCSR(indptr, self.token[entries], self.count[entries], self.vocab_size)

    def stacked(self, other: CountsCSR) -> CountsCSR:
        """Two count sets of the same strings side by side: string i's tokens are its tokens here (0..V-1) and
        its tokens in ``other`` shifted by V (V..2V-1), so one search sums both into ``[... 2V]``: how the torch
        pass sums the permuted null of method.md §6b beside the real counts (:func:`search_block`'s ``null``)."""
        n = len(self.indptr) - 1
        if len(other.indptr) - 1 != n or other.vocab_size != self.vocab_size:
            raise ValueError("stacked count sets must have the same strings and vocabulary")
        rows = np.concatenate([np.repeat(np.arange(n), np.diff(self.indptr)),
                               np.repeat(np.arange(n), np.diff(other.indptr))])
        order = np.argsort(rows, kind="stable")  # each string's own tokens first, then the other set's
        indptr = self.indptr + other.indptr
        token = np.concatenate([self.token, other.token + self.vocab_size])[order]
        count = np.concatenate([self.count, other.count])[order]
        return CountsCSR(indptr, token.astype(np.int32), count, 2 * self.vocab_size)

    def packed(self) -> np.ndarray:
        """One int64 per string: ``count << 32 | token`` when it has exactly one next token (most
        strings), -1 when it has several (read the CSR), -2 when none. One load instead of three."""
        nnz = np.diff(self.indptr)
        code = np.where(nnz == 0, -2, -1).astype(np.int64)
        one = np.flatnonzero(nnz == 1)
        first = self.indptr[one]
        code[one] = (self.count[first].astype(np.int64) << 32) | self.token[first].astype(np.int64)
        return code


def null_permutation(members: np.ndarray, seed: int) -> np.ndarray:
    """The null's permutation of the strings (method.md §6b): the searched strings (``members``) shuffled among
    themselves by a generator of ``seed``, every other string fixed. String i's null next-token counts are
    string ``perm[i]``'s real ones (``counts.take(perm)``). It depends on the searched set only, so the
    corpus and paper modes (the same strings) get the same permutation, and the values tuned on the one
    apply to the other."""
    searched = np.flatnonzero(np.asarray(members, dtype=bool))
    perm = np.arange(len(members))
    perm[searched] = searched[np.random.default_rng(seed).permutation(len(searched))]
    return perm


def rounding_margin(d_model: int) -> float:
    """Bound on |float32 cosine - exact cosine| for a tile value: the float32 dot product of length
    ``d_model`` of a float32 unit prompt and a raw string vector, times the string's float64 inverse
    norm. d u for the dot product plus a few u for the prompt's float32 scaling and the product,
    u = 2**-24; doubled for safety."""
    return 2 * (d_model + 4) * 2.0**-24


@contextmanager
def exact_float32_matmul():
    """float32 matrix multiplies in full float32 inside the block: no TF32 on a GPU, no bf16 on a CPU
    (``torch.set_float32_matmul_precision("medium")`` would allow either). The search's error bounds
    assume it; the previous setting is restored on exit."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def reduced_precision_matmul_enabled() -> bool:
    """True when float32 matmuls may run in TF32 or bf16 (the search refuses to run then)."""
    return torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32


@functools.cache
def _onednn_float32_available() -> bool:
    """Whether torch offers oneDNN's float32 linear on the CPU (``torch.ops.mkldnn._linear_pointwise``)
    and it gives the float32 product (checked against float64 on a small case, once)."""
    try:
        a = torch.randn(8, 40, generator=torch.Generator().manual_seed(0))
        b = torch.randn(16, 40, generator=torch.Generator().manual_seed(1))
        got = torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], "")
    except (AttributeError, RuntimeError):  # a torch built without oneDNN, or without the op
        return False
    error = (got.double() - a.double() @ b.double().T).abs().max().item()
    return got.dtype == torch.float32 and error <= 40 * 2.0**-24 * 64


def _tile_matmul(a: torch.Tensor, b_t: torch.Tensor) -> torch.Tensor:
    """One tile: ``a @ b_t`` [rows width] in full float32. Every tile of the search goes through here.

    On the CPU, when ``b_t`` is the transpose of contiguous rows (the strings), the product is
    oneDNN's float32 linear where torch has it: on AMD CPUs MKL's sgemm takes its AVX2 path and
    oneDNN its AVX-512 one, twice as fast on the development machine. Full float32 either way
    (float32 accumulation in some order, which :func:`rounding_margin` allows; oneDNN does not follow
    ``torch.set_float32_matmul_precision``, which the check below still refuses)."""
    if reduced_precision_matmul_enabled():
        raise RuntimeError("float32 matmuls are set to a reduced precision (TF32/bf16) during the search; "
                           "its exactness bound needs full float32 (run it inside exact_float32_matmul())")
    if a.device.type == "cpu" and a.is_contiguous() and b_t.T.is_contiguous() and _onednn_float32_available():
        return torch.ops.mkldnn._linear_pointwise(a, b_t.T, None, "none", [], "")
    return a @ b_t


@numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _norms_into(x, lo, hi, out):  # pragma: no cover - compiled
    """out[i] = float64 norm of x[i], for rows lo..hi (no float64 copy of the matrix). Summed in any
    order (vectorised): float64 sums of float32 squares, off by about d_model 2**-53, far inside the
    float32 margin of the tiles; the brute force's norms sum in an order of their own."""
    for i in range(lo, hi):
        acc = 0.0
        for j in range(x.shape[1]):
            acc += np.float64(x[i, j]) * np.float64(x[i, j])
        out[i] = np.sqrt(acc)


def _in_parallel(n: int, threads: int, fn, chunk: int = 16384) -> None:
    """``fn(lo, hi)`` over row ranges of ``n`` rows, on ``threads`` threads (fn releases the GIL)."""
    ranges = [(lo, min(lo + chunk, n)) for lo in range(0, n, chunk)]
    if threads == 1 or len(ranges) <= 1:
        for lo, hi in ranges:
            fn(lo, hi)
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda r: fn(*r), ranges))


def _norms(x: np.ndarray, threads: int = 1) -> np.ndarray:
    out = np.empty(len(x), dtype=np.float64)
    _in_parallel(len(x), threads, lambda lo, hi: _norms_into(x, lo, hi, out))
    return out


def _inverse(norms: np.ndarray) -> np.ndarray:
    """1 / norms, 0 where a norm is 0 (a zero vector's cosine with anything is 0)."""
    return np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)


def _bins(cos: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin k for cos in (edges[k], edges[k+1]], -1 at or below edges[0]."""
    return np.searchsorted(edges, cos, side="left") - 1


# ---------------------------------------------------------------- the compiled CPU pass

#: Pairs near an edge set aside before they are decided together (:func:`_settle_near_edge`): 512 KB.
NEAR_EDGE_BATCH = 65536


@numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})
def _settle_near_edge(near, n, rows, p0, s0, prompts, strings, p_norms, s_norms, edges, code, indptr, token, count,
                      matches, flat, code2, indptr2, token2, count2, flat2):  # pragma: no cover - compiled
    """Decide in float64 the ``n`` pairs of a tile that lie near an edge (``near``: keys
    ``column * rows + row``), in string order (the string rows are read in ascending addresses).

    The float64 dot product is written out here rather than called: a call with array arguments
    costs atomic reference-count updates, which made each re-check about 650 ns at d_model 384, as
    much as all the other pairs' binning together. Summed in any order (fastmath, vectorised): its
    rounding, about d_model 2**-53, is far inside the float32 margin that sends a pair here, and the
    brute force's BLAS sums in an order of its own.

    ``code2``, ``indptr2``, ``token2``, ``count2``, ``flat2``: the second count set (the permuted null of method.md
    §6b, as :meth:`CountsCSR.packed` and its CSR, rows in the strings' order), summed for the same matches; empty
    ``code2``: none."""
    vocab, d_model = flat.shape[1] // matches.shape[1], prompts.shape[1]
    second = len(code2) > 0
    keys = near[:n]
    keys.sort()
    for key in keys:
        j, r = key // rows, key % rows
        q, pr = s0 + j, p0 + r
        dot = 0.0
        for i in range(d_model):
            dot += np.float64(prompts[pr, i]) * np.float64(strings[q, i])
        denom = p_norms[pr] * s_norms[q]
        c = dot / denom if denom > 0 else 0.0
        k = np.searchsorted(edges, min(max(c, -1.0), 1.0)) - 1
        if k < 0:
            continue
        # the match and its counts, as in _bin_tile's sparse rows: written out in both places, since a
        # shared function (even numba's inline="always") made every candidate about twice as slow
        matches[r, k] += 1
        x = code[q]
        if x >= 0:
            flat[r, k * vocab + (x & 0xFFFFFFFF)] += x >> 32
        elif x == -1:
            for e in range(indptr[q], indptr[q + 1]):
                flat[r, k * vocab + token[e]] += count[e]
        if second:
            x = code2[q]
            if x >= 0:
                flat2[r, k * vocab + (x & 0xFFFFFFFF)] += x >> 32
            elif x == -1:
                for e in range(indptr2[q], indptr2[q + 1]):
                    flat2[r, k * vocab + token2[e]] += count2[e]


@numba.njit(nogil=True, cache=True)
def _bin_tile(tile, p0, s0, prompts, strings, p_norms, s_norms, s_threshold, s_inverse, start, inv_step,
              margin_bins, edges, dense_limit, single_token, single_count, several, code, indptr, token, count,
              matches, summed, cand, kbuf, near, code2, indptr2, token2, count2, single_token2, single_count2,
              several2, summed2):  # pragma: no cover - compiled
    """Bin one tile [rows width] (rows = prompts p0.., columns = strings s0..): ``tile`` is the float32
    product of the float32 unit prompts and the raw string vectors, so an entry's cosine is its value
    times the string's float64 inverse norm (``s_inverse``), within :func:`rounding_margin`.

    Per row, the entries at or above the string's ``s_threshold`` (the lowest edge less the margin,
    times the string's norm) are the candidates, found by a compaction without branches. A row with
    fewer than ``dense_limit`` candidates bins them one by one: its cosine, its bin, the match and the
    string's next-token counts (``code``: :meth:`CountsCSR.packed`: the count and token of a string
    with one next token, -1 for several, read from the CSR) added to ``matches[row]`` and
    ``summed[row]``. A denser row (the weakly trained models of short runs, whose activations are much
    alike, have rows where most entries match) bins every entry in three passes without a
    data-dependent branch in their inner loops (there those mispredict and cost more than the
    arithmetic): (1) each entry's bin, in code the compiler vectorises, with spare bins, never read,
    for entries below the lowest edge and for those near an edge; (2) the strings with
    several next tokens (``several``: their indices, sorted) counted from the CSR; (3) every entry's
    one next token (``single_token``/``single_count``, count 0 for the others) added to a per-row table
    in L1, flushed once per row. Entries within ``margin_bins`` of an edge are set aside (``near``:
    int64 scratch, as long as the caller likes) and decided in float64 by :func:`_settle_near_edge`
    when it fills and at the end of the tile. ``cand``, ``kbuf``: int32 scratch >= width.

    A second count set (``code2`` not empty: the permuted null of method.md §6b) is summed into ``summed2`` for the
    same matches and bins, each way the first is: its packed codes ``code2``, its one-token arrays
    ``single_token2``/``single_count2``, the strings whose second counts have several tokens ``several2`` (read from
    its own CSR ``indptr2``/``token2``/``count2``, rows in the strings' order, so it is read as the first set's is).
    The matches, bins and float64 re-checks are shared: no second similarity pass.
    """
    rows, width = tile.shape
    n_bins, vocab = summed.shape[1], summed.shape[2]
    spare, near_edge = n_bins, n_bins + 1
    flat = summed.reshape(rows, n_bins * vocab)
    second = len(code2) > 0
    flat2 = summed2.reshape(summed2.shape[0], summed2.shape[1] * summed2.shape[2])
    # per-row tables of dense rows; their bins n_bins (below the lowest edge) and n_bins + 1 (near an
    # edge: decided later) are never read
    local_m = np.zeros(n_bins + 2, dtype=matches.dtype)
    local_c = np.zeros((n_bins + 2) * vocab, dtype=summed.dtype)
    local_c2 = np.zeros((n_bins + 2) * vocab if second else 0, dtype=summed.dtype)
    s_thr, s_inv = s_threshold[s0 : s0 + width], s_inverse[s0 : s0 + width]
    top = np.float64(n_bins - 1)
    several_lo, several_hi = np.searchsorted(several, s0), np.searchsorted(several, s0 + width)
    several2_lo, several2_hi = np.searchsorted(several2, s0), np.searchsorted(several2, s0 + width)
    n_near = 0
    for r in range(rows):
        row = tile[r]
        n = 0
        for j in range(width):  # branch-free compaction of the candidates' columns
            cand[n] = j
            n += row[j] >= s_thr[j]
        if n == 0:
            continue
        if n < dense_limit:  # a sparse row: candidate by candidate
            for i in range(n):
                j = cand[i]
                u = (np.float64(row[j]) * s_inv[j] - start) * inv_step  # position on the edge grid, in bins
                if abs(u - np.floor(u + 0.5)) <= margin_bins:  # near an edge: decided in float64 later
                    near[n_near] = j * rows + r
                    n_near += 1
                    if n_near == len(near):
                        _settle_near_edge(near, n_near, rows, p0, s0, prompts, strings, p_norms, s_norms, edges,
                                          code, indptr, token, count, matches, flat, code2, indptr2, token2, count2,
                                          flat2)
                        n_near = 0
                    continue
                k = min(int(np.ceil(u)) - 1, n_bins - 1)  # bin (edge_k, edge_k+1]; the last is open
                if k < 0:
                    continue
                q = s0 + j
                matches[r, k] += 1
                x = code[q]
                if x >= 0:
                    flat[r, k * vocab + (x & 0xFFFFFFFF)] += x >> 32
                elif x == -1:
                    for e in range(indptr[q], indptr[q + 1]):
                        flat[r, k * vocab + token[e]] += count[e]
                if second:
                    x = code2[q]
                    if x >= 0:
                        flat2[r, k * vocab + (x & 0xFFFFFFFF)] += x >> 32
                    elif x == -1:
                        for e in range(indptr2[q], indptr2[q + 1]):
                            flat2[r, k * vocab + token2[e]] += count2[e]
            continue
        for j in range(width):  # (1)
            u = (np.float64(row[j]) * s_inv[j] - start) * inv_step
            k = min(np.ceil(u) - 1.0, top)
            k = k if k >= 0.0 else np.float64(spare)
            kbuf[j] = near_edge if abs(u - np.floor(u + 0.5)) <= margin_bins else np.int32(k)
        n_marked = 0
        for j in range(width):  # the marked entries, collected branch-free
            cand[n_marked] = j
            n_marked += kbuf[j] == near_edge
        for i in range(n_marked):
            near[n_near] = cand[i] * rows + r
            n_near += 1
            if n_near == len(near):
                _settle_near_edge(near, n_near, rows, p0, s0, prompts, strings, p_norms, s_norms, edges, code,
                                  indptr, token, count, matches, flat, code2, indptr2, token2, count2, flat2)
                n_near = 0
        for i in range(several_lo, several_hi):  # (2) strings with several next tokens: counts from the CSR
            q = several[i]
            k = kbuf[q - s0]
            if k < n_bins:
                for e in range(indptr[q], indptr[q + 1]):
                    local_c[k * vocab + token[e]] += count[e]
        if second:  # (3), with the second count set's one next token in the same pass
            for j in range(width):
                k = kbuf[j]
                local_m[k] += 1
                local_c[k * vocab + single_token[s0 + j]] += single_count[s0 + j]
                local_c2[k * vocab + single_token2[s0 + j]] += single_count2[s0 + j]
        else:
            for j in range(width):  # (3)
                k = kbuf[j]
                local_m[k] += 1
                local_c[k * vocab + single_token[s0 + j]] += single_count[s0 + j]
        for k in range(n_bins):
            matches[r, k] += local_m[k]
        local_m[:] = 0
        for cell in range(n_bins * vocab):
            flat[r, cell] += local_c[cell]
        local_c[:] = 0
        if second:  # (2) and (3) of the second count set, for the same bins
            for i in range(several2_lo, several2_hi):
                q = several2[i]
                k = kbuf[q - s0]
                if k < n_bins:
                    for e in range(indptr2[q], indptr2[q + 1]):
                        local_c2[k * vocab + token2[e]] += count2[e]
            for cell in range(n_bins * vocab):
                flat2[r, cell] += local_c2[cell]
            local_c2[:] = 0
    _settle_near_edge(near, n_near, rows, p0, s0, prompts, strings, p_norms, s_norms, edges, code, indptr, token,
                      count, matches, flat, code2, indptr2, token2, count2, flat2)


# ---------------------------------------------------------------- the torch pass (any device)

def _bin_tile_torch(tile: torch.Tensor, p0: int, s0: int, prompts: torch.Tensor, strings: torch.Tensor,
                    p_norms: torch.Tensor, s_norms: torch.Tensor, s_threshold: torch.Tensor,
                    s_inverse: torch.Tensor, start: float, inv_step: float, margin_bins: float, edges: torch.Tensor,
                    counts: dict, matches: torch.Tensor, summed: torch.Tensor, pair_chunk: int = 1 << 21) -> None:
    """:func:`_bin_tile` in torch operations, on the tile's device; same arguments as tensors,
    ``counts``: the CSR as tensors. Pairs are handled ``pair_chunk`` at a time to bound memory."""
    n_bins, vocab = summed.shape[1], summed.shape[2]
    width = tile.shape[1]
    rr, jj = torch.nonzero(tile >= s_threshold[s0 : s0 + width], as_tuple=True)
    for i in range(0, len(rr), pair_chunk):
        r, j = rr[i : i + pair_chunk], jj[i : i + pair_chunk]
        q = s0 + j
        u = (tile[r, j].double() * s_inverse[q] - start) * inv_step
        k = torch.ceil(u).long() - 1
        near = (u - torch.floor(u + 0.5)).abs() <= margin_bins
        if near.any():  # near an edge: decide in float64
            rn, qn = r[near], q[near]
            dots = (prompts[p0 + rn].double() * strings[qn].double()).sum(dim=1)
            denom = p_norms[p0 + rn] * s_norms[qn]
            exact = torch.where(denom > 0, dots / torch.where(denom > 0, denom, torch.ones_like(denom)),
                                torch.zeros_like(dots)).clamp(-1.0, 1.0)
            k[near] = torch.searchsorted(edges, exact, right=False) - 1
        k = k.clamp(max=n_bins - 1)
        keep = k >= 0
        r, q, k = r[keep], q[keep], k[keep]
        cell = r * n_bins + k  # matches/summed hold this prompt chunk's rows
        matches.view(-1).index_add_(0, cell, torch.ones_like(cell))
        nnz = counts["indptr"][q + 1] - counts["indptr"][q]
        total = int(nnz.sum())
        if total == 0:
            continue
        owner = torch.repeat_interleave(torch.arange(len(q), device=q.device), nnz, output_size=total)
        first = torch.cumsum(nnz, 0) - nnz
        entry = counts["indptr"][q][owner] + torch.arange(total, device=q.device) - first[owner]
        summed.view(-1).index_add_(0, cell[owner] * vocab + counts["token"][entry], counts["count"][entry])


# ---------------------------------------------------------------- the search

def _chunks(device: torch.device) -> tuple[int, int]:
    """Default (prompt_chunk, string_chunk). CPU: 256 x 4096 tiles (the fastest of 32-256 x 1024-8192 at
    d_model 64 and 384 on a 2-core machine: fewer prompt rows re-read the strings more often, and a
    prompt chunk's int32 sums are 2 MB); GPU: large tiles."""
    return (2048, 65536) if device.type != "cpu" else (256, 4096)


def search_block(prompts: np.ndarray, strings: np.ndarray, counts: CountsCSR, edges: np.ndarray,
                 members: np.ndarray | None = None, *, device: torch.device | str = "cpu",
                 binner: str | None = None, threads: int | None = None, prompt_chunk: int | None = None,
                 string_chunk: int | None = None, dense_fraction: float = 0.3, progress: bool = False,
                 desc: str = "search", null: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Binned matches of every prompt against every string, for one block.

    prompts: [n_prompts d_model], strings: [n_strings d_model] (float32 activations);
    ``edges`` must be a uniform grid (:func:`threshold_edges`); ``members``: which strings are searched
    (all if None). ``device``: where the tiles are multiplied and binned; ``binner``: ``compiled`` (CPU
    only, the default there) or ``torch`` (the default elsewhere); ``threads``: CPU worker threads
    (default: torch's thread count as the caller set it with ``torch.set_num_threads``);
    ``dense_fraction``: with the compiled binner, a tile row with at least this share of its entries
    candidates is binned entry by entry without branches rather than candidate by candidate (0: every
    row, above 1: none; 0.3: as fast as the best of 0.1-0.5 on blocks of paper_short's activations, 87%
    and fewer pairs above the lowest edge, and of the small preset's, 9%, at d_model 64 and 384).
    Returns ``(bin_matches [n_prompts n_bins], bin_counts [n_prompts n_bins vocab])``, int64. ``null``: a
    permutation of the strings that maps searched strings to searched strings (:func:`null_permutation`); with it
    the same pass also sums string ``null[i]``'s counts where string i matches (the permuted null of method.md §6b)
    and a third array, those sums, is returned.
    """
    device = torch.device(device)
    binner = binner or ("compiled" if device.type == "cpu" else "torch")
    if binner not in ("compiled", "torch") or (binner == "compiled" and device.type != "cpu"):
        raise ValueError(f"binner {binner!r} is not available on {device}; use 'compiled' (CPU) or 'torch'")
    n_p, n_bins, vocab = len(prompts), len(edges), counts.vocab_size
    d_model = prompts.shape[1]
    edges64 = np.asarray(edges, dtype=np.float64)
    start, step = float(edges64[0]), float(edges64[1] - edges64[0]) if n_bins > 1 else 1.0
    if n_bins > 1 and not np.allclose(np.diff(edges64), step, rtol=0, atol=1e-12):
        raise ValueError("threshold edges must be a uniform grid")
    margin = rounding_margin(d_model)
    margin_bins = margin / step + 1e-6  # values this near an edge go to float64
    default_p, default_s = _chunks(device)
    prompt_chunk, string_chunk = prompt_chunk or default_p, string_chunk or default_s

    prompts = np.ascontiguousarray(prompts, dtype=np.float32)
    strings = np.ascontiguousarray(strings, dtype=np.float32)
    threads = max(1, threads or torch.get_num_threads())
    perm = None if null is None else np.asarray(null, dtype=np.int64)
    if members is not None and not np.all(members):  # the searched strings, contiguous (a copy)
        rows = np.flatnonzero(np.asarray(members, dtype=bool))
        strings, counts = strings[rows], counts.take(rows)
        if perm is not None:  # the permutation in searched positions
            position = np.full(len(members), -1, dtype=np.int64)
            position[rows] = np.arange(len(rows))
            perm = position[perm[rows]]
    if perm is not None and (len(perm) != len(strings) or (perm < 0).any()):
        raise ValueError("the null's permutation must map the searched strings onto themselves (null_permutation)")
    # Everything per string from here on is in searched order: column j of a tile is string s0 + j.
    p_norms, s_norms = _norms(prompts, threads), _norms(strings, threads)
    # float32 unit prompts (a few ulps from the float64 scaling, inside rounding_margin), raw strings: no
    # scaled copy of the strings, and an entry's cosine is tile * s_inverse
    p_unit = torch.from_numpy(prompts * _inverse(p_norms)[:, None].astype(np.float32))
    s_inverse = _inverse(s_norms)
    # a candidate has tile >= (lowest edge - margin) |s|, taken one float32 step lower: every pair whose
    # cosine exceeds the lowest edge is one (for a zero string: tile 0 >= 0, then cosine 0)
    s_threshold = np.nextafter(((start - margin) * s_norms).astype(np.float32), np.float32(-np.inf))
    matches = np.zeros((n_p, n_bins), dtype=np.int64)
    summed = np.zeros((n_p, n_bins, vocab), dtype=np.int64)
    summed2 = np.zeros((n_p, n_bins, vocab) if perm is not None else (0, 0, 0), dtype=np.int64)
    result = (matches, summed) if perm is None else (matches, summed, summed2)
    if n_p == 0 or len(strings) == 0:
        return result
    chunks = list(range(0, n_p, prompt_chunk))
    bar = tqdm(total=len(chunks), disable=not progress, desc=desc, unit="prompt chunk", mininterval=5)

    with exact_float32_matmul():
        if binner == "compiled":
            strings_t = torch.from_numpy(strings).T  # [d_model strings]: tiles are column slices (a view)
            code = counts.packed()
            # for dense rows: each string's one next token with its count (0 where it has none or several)
            single_token = np.where(code >= 0, code & 0xFFFFFFFF, 0).astype(np.int32)
            single_count = np.where(code >= 0, code >> 32, 0).astype(np.int32)
            several = np.flatnonzero(code == -1)
            # the second count set: string q's are string perm[q]'s, its CSR rows in the strings' order (read
            # sequentially, as the first set's is; empty arrays: none)
            take = perm if perm is not None else np.zeros(0, dtype=np.int64)
            second = counts.take(take) if perm is not None else CountsCSR(np.zeros(1, dtype=np.int64), counts.token[:0],
                                                                          counts.count[:0], vocab)
            code2, single_token2, single_count2 = code[take], single_token[take], single_count[take]
            several2 = np.flatnonzero(code2 == -1)
            torch_threads = torch.get_num_threads()
            torch.set_num_threads(1)  # each worker multiplies its own tiles on its own core

            def work(p0: int) -> None:
                p_tile = p_unit[p0 : p0 + prompt_chunk]
                rows = len(p_tile)
                cand = np.empty(string_chunk, dtype=np.int32)
                kbuf = np.empty(string_chunk, dtype=np.int32)
                near = np.empty(NEAR_EDGE_BATCH, dtype=np.int64)
                # int32 sums (a bin's count of one token is at most the text's length) keep the chunk's
                # accumulators in cache: 256 prompts x 30 bins x 65 tokens x 4 bytes = 2 MB
                m_chunk = np.zeros((rows, n_bins), dtype=np.int32)
                c_chunk = np.zeros((rows, n_bins, vocab), dtype=np.int32)
                c_chunk2 = np.zeros((rows, n_bins, vocab) if perm is not None else (0, 0, 0), dtype=np.int32)
                for s0 in range(0, len(strings), string_chunk):
                    tile = _tile_matmul(p_tile, strings_t[:, s0 : s0 + string_chunk]).numpy()
                    _bin_tile(tile, p0, s0, prompts, strings, p_norms, s_norms, s_threshold, s_inverse, start,
                              1.0 / step, margin_bins, edges64, dense_fraction * tile.shape[1], single_token,
                              single_count, several, code, counts.indptr, counts.token, counts.count, m_chunk,
                              c_chunk, cand, kbuf, near, code2, second.indptr, second.token, second.count,
                              single_token2, single_count2, several2, c_chunk2)
                matches[p0 : p0 + rows] = m_chunk
                summed[p0 : p0 + rows] = c_chunk
                if perm is not None:
                    summed2[p0 : p0 + rows] = c_chunk2
                bar.update(1)

            try:
                if threads == 1:
                    for p0 in chunks:
                        work(p0)
                else:
                    with ThreadPoolExecutor(threads) as pool:
                        list(pool.map(work, chunks))
            finally:
                torch.set_num_threads(torch_threads)
        else:
            t = {  # everything the torch pass reads, on the device
                "prompts": torch.from_numpy(prompts).to(device), "strings": torch.from_numpy(strings).to(device),
                "p_norms": torch.from_numpy(p_norms).to(device), "s_norms": torch.from_numpy(s_norms).to(device),
                "s_threshold": torch.from_numpy(s_threshold).to(device),
                "s_inverse": torch.from_numpy(s_inverse).to(device), "edges": torch.from_numpy(edges64).to(device),
            }
            # the second count set rides along as V more columns of each string's counts (CountsCSR.stacked)
            both = counts if perm is None else counts.stacked(counts.take(perm))
            csr = {"indptr": torch.from_numpy(both.indptr).to(device),
                   "token": torch.from_numpy(both.token).to(device).long(),
                   "count": torch.from_numpy(both.count).to(device).long()}
            p_dev, s_dev_t = p_unit.to(device), t["strings"].T
            for p0 in chunks:
                rows = min(prompt_chunk, n_p - p0)
                m_dev = torch.zeros((rows, n_bins), dtype=torch.int64, device=device)
                c_dev = torch.zeros((rows, n_bins, both.vocab_size), dtype=torch.int64, device=device)
                for s0 in range(0, len(strings), string_chunk):
                    tile = _tile_matmul(p_dev[p0 : p0 + rows], s_dev_t[:, s0 : s0 + string_chunk])
                    _bin_tile_torch(tile, p0, s0, t["prompts"], t["strings"], t["p_norms"], t["s_norms"],
                                    t["s_threshold"], t["s_inverse"], start, 1.0 / step, margin_bins, t["edges"],
                                    csr, m_dev, c_dev)
                matches[p0 : p0 + rows] = m_dev.cpu().numpy()
                summed[p0 : p0 + rows] = c_dev[..., :vocab].cpu().numpy()
                if perm is not None:
                    summed2[p0 : p0 + rows] = c_dev[..., vocab:].cpu().numpy()
                bar.update(1)
    bar.close()
    return result


def search_block_bruteforce(prompts: np.ndarray, strings: np.ndarray, counts: np.ndarray, edges: np.ndarray,
                            members: np.ndarray | None = None, chunk: int = 32768) -> tuple[np.ndarray, np.ndarray]:
    """Reference: the dense float64 cosine matrix, binned. Same outputs as :func:`search_block`.

    Memory is O(n_prompts x chunk) float64 (``chunk`` strings at a time): for tests and verification
    samples of prompts, against any number of strings. Counts are summed with float64 bincounts
    (integer sums below 2**53 are exact).
    """
    edges = np.asarray(edges, dtype=np.float64)
    n_p, n_bins, vocab = len(prompts), len(edges), counts.shape[1]
    matches = np.zeros(n_p * n_bins, dtype=np.int64)
    summed = np.zeros((vocab, n_p * n_bins), dtype=np.float64)
    for s0 in range(0, len(strings), chunk):
        # tinylens.measures.cosine_matrix: the one definition
        cos = np.clip(cosine_matrix(prompts, strings[s0 : s0 + chunk]), -1.0, 1.0)
        k = _bins(cos, edges)  # [prompts chunk]
        if members is not None:
            k[:, ~np.asarray(members[s0 : s0 + chunk], dtype=bool)] = -1
        pi, si = np.nonzero(k >= 0)
        cell = pi * n_bins + k[pi, si]
        matches += np.bincount(cell, minlength=n_p * n_bins)
        pair_counts = np.asarray(counts[s0 : s0 + chunk], dtype=np.float64)[si]  # [pairs vocab]
        for t in np.flatnonzero(pair_counts.any(axis=0)):
            summed[t] += np.bincount(cell, weights=pair_counts[:, t], minlength=n_p * n_bins)
    return matches.reshape(n_p, n_bins), np.rint(summed.T).astype(np.int64).reshape(n_p, n_bins, vocab)


def cumulative(binned: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """From per-bin values to "above edge k" values: reverse cumulative sum along ``axis``, in the
    input's dtype. ``out=binned`` works in place (the search summary's counts are the largest arrays
    of tuning and evaluation: no copy of them is made)."""
    target = None if out is None else np.flip(out, axis=axis)
    return np.flip(np.cumsum(np.flip(binned, axis=axis), axis=axis, dtype=binned.dtype, out=target), axis=axis)


def search_prompts(prompt_blocks: Sequence[np.ndarray], string_blocks, counts: CountsCSR, edges: np.ndarray,
                   members: np.ndarray | None = None, progress: bool = True, null: np.ndarray | None = None,
                   **options) -> tuple[np.ndarray, ...]:
    """All blocks: ``string_blocks`` is a callable ``block -> [n_strings d_model]`` array, so only one
    block's strings are in memory at a time; ``options`` go to :func:`search_block` (device,
    threads, chunks). Returns ``(matches [prompts blocks bins], counts [prompts blocks bins vocab])`` as
    uint32 (what the summary stores), filled block by block: one block's int64 result is the only copy; with
    ``null`` (:func:`search_block`) also the second count set's sums, as a third array."""
    n_p, n_b, n_bins = len(prompt_blocks[0]), len(prompt_blocks), len(edges)
    matches = np.zeros((n_p, n_b, n_bins), dtype=np.uint32)
    sums = [np.zeros((n_p, n_b, n_bins, counts.vocab_size), dtype=np.uint32) for _ in range(1 if null is None else 2)]
    for b, p in enumerate(prompt_blocks):
        m, *cs = search_block(p, string_blocks(b), counts, edges, members, progress=progress, desc=f"block {b}",
                              null=null, **options)
        if max(m.max(initial=0), *(c.max(initial=0) for c in cs)) >= 2**32:
            raise OverflowError("binned counts exceed uint32")
        matches[:, b] = m
        for out, c in zip(sums, cs):
            out[:, b] = c
    return (matches, *sums)


def search_prompts_with_null(prompt_blocks: Sequence[np.ndarray], string_blocks, counts: CountsCSR, edges: np.ndarray,
                             members: np.ndarray | None, null_seed: int, **options
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`search_prompts`, and in the same pass the permuted null of method.md §6b: the sums of the strings'
    next-token counts permuted among the searched strings (:func:`null_permutation` of ``null_seed``). Returns
    ``(matches, counts, null_counts)``; the matches are the null's too (the same strings match)."""
    members_ = np.ones(len(counts.indptr) - 1, dtype=bool) if members is None else np.asarray(members, dtype=bool)
    return search_prompts(prompt_blocks, string_blocks, counts, edges, members,
                          null=null_permutation(members_, null_seed), **options)


def write_summary(path, prompt_ids: np.ndarray, matches: np.ndarray, counts: np.ndarray) -> None:
    """One row per (prompt, block). matches: [prompts blocks bins], counts: [prompts blocks bins vocab]."""
    from tinylens.tables import write_table

    n_p, n_b, n_bins, vocab = counts.shape
    if counts.max(initial=0) >= 2**32 or matches.max(initial=0) >= 2**32 or min(counts.min(initial=0),
                                                                                  matches.min(initial=0)) < 0:
        raise OverflowError("binned counts do not fit uint32")
    write_table(path, summary_schema(n_bins, vocab), {
        "prompt_id": np.repeat(np.asarray(prompt_ids, dtype=np.int32), n_b),
        "block": np.tile(np.arange(n_b, dtype=np.int8), n_p),
        "bin_matches": matches.reshape(n_p * n_b, n_bins).astype(np.uint32, copy=False),
        "bin_counts": counts.reshape(n_p * n_b, n_bins * vocab).astype(np.uint32, copy=False),
    })


def load_summary(paths: Sequence, n_blocks: int, n_bins: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read search summaries (one per shard, or the gathered one) back into
    ``(prompt_ids [P], matches [P blocks bins], counts [P blocks bins vocab])``, sorted by prompt, as
    stored (uint32). One shard's table at a time is read and written straight into its place, so
    the peak is the output plus one shard (at paper scale the counts are 20,000 x 6 x 30 x 65)."""
    from tinylens.tables import fixed_list_to_numpy, read_table

    schema = summary_schema(n_bins, vocab_size)
    keys = [read_table(p, schema, columns=["prompt_id", "block"]) for p in paths]
    keys = [(t["prompt_id"].to_numpy(), t["block"].to_numpy().astype(np.int64)) for t in keys]
    prompt_ids = np.unique(np.concatenate([ids for ids, _ in keys])) if keys else np.zeros(0, dtype=np.int32)
    matches = np.zeros((len(prompt_ids), n_blocks, n_bins), dtype=np.uint32)
    counts = np.zeros((len(prompt_ids), n_blocks, n_bins, vocab_size), dtype=np.uint32)
    seen = np.zeros((len(prompt_ids), n_blocks), dtype=np.int64)
    for path, (ids, blocks) in zip(paths, keys):
        if blocks.size and (blocks.min() < 0 or blocks.max() >= n_blocks):
            break  # reported below
        rows = np.searchsorted(prompt_ids, ids)
        table = read_table(path, schema, columns=["bin_matches", "bin_counts"])
        matches[rows, blocks] = fixed_list_to_numpy(table["bin_matches"])
        counts[rows, blocks] = fixed_list_to_numpy(table["bin_counts"]).reshape(-1, n_bins, vocab_size)
        del table
        np.add.at(seen, (rows, blocks), 1)
    if not (seen == 1).all():
        raise ValueError(f"search summary {list(map(str, paths))} does not hold all {n_blocks} blocks exactly once "
                         "for every prompt; rerun the search (snakemake --forcerun search_shard)")
    return prompt_ids, matches, counts
