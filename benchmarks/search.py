"""Similarity search: the exact streamed search against the dense all-pairs way, in one run.

Both methods find, for every prompt and block, the strings whose cosine
similarity with the prompt exceeds each edge of the threshold grid
(0.70, 0.71, ..., 0.99) and sum their next-token counts:

- ours: ``tinylens.search.search_block`` (float32 tiles, float64 re-check of
  pairs near an edge, per-bin sums; exact);
- naive, as the original research code did it: the dense float32 cosine
  matrix of all prompts x all strings of a block, fully materialised, filtered
  at 0.70, then for each prompt and each of the 30 edges a numpy sum of the
  next-token counts of the strings above the edge (a Python loop).

Inputs are real activations (``ffwd_out``) of a trained model: a fixed random
sample of the corpus' unique length-10 strings, dumped once into ``--cache``
and reused by later runs; the prompts are a fixed random sample of them
(corpus mode). Each method runs in its own spawned process, block by block;
its time excludes loading the inputs, and its memory is the process' peak
RSS while searching (peak reset through /proc/self/clear_refs once the
block's inputs are loaded, so Linux only), given in total and above the RSS
of holding the inputs.

Paper-scale projection (20,000 prompts x 858,923 strings x 6 blocks,
d_model 384): ours is timed on a slice whose 64-dim activations are mapped to
384 dims by a fixed matrix with orthonormal columns, which keeps every cosine
(up to float32 rounding) and so the real candidate density, at the matmul
cost of d=384. Time is projected from the slice's pairs/s; memory from the
array sizes in ``search_block``, checked against the slice's measured peak.

    python benchmarks/search.py --model results/small/models/seed1337 --corpus /path/to/input.txt
                                            # 200,000 strings, 200 prompts, 6 blocks
    python benchmarks/search.py --model ... --corpus ... --strings 100000 --blocks 0 5 --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import multiprocessing
import os
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numba
import numpy as np
import torch

from tinylens.activations import dump_activations, load_block
from tinylens.corpus import CharTokenizer
from tinylens.search import CountsCSR, search_block, threshold_edges
from tinylens.strings import build_strings
from tinylens.weights import load_model

KIND = "ffwd_out"
EDGES = threshold_edges(0.70, 0.01, 30)
PAPER = {"prompts": 20_000, "strings": 858_923, "blocks": 6, "d_model": 384}
MIB = 2**20


# ---------------------------------------------------------------- inputs

def prepare_cache(cache: Path, model_dir: Path, corpus: Path, n_strings: int, seed: int) -> Path:
    """Dump the activations of a fixed random sample of the strings once; later runs reuse it.

    Returns the sample's directory: ``block{b}.parquet`` (rows = sampled strings, in table order),
    ``counts.npy`` [rows vocab] (next-token counts over the whole text) and ``meta.json``, written last.
    """
    meta = {"model": str(model_dir.resolve()), "corpus": str(corpus.resolve()), "strings": n_strings,
            "seed": seed, "kind": KIND}
    out = cache / f"strings{n_strings}-seed{seed}"
    stored = json.loads((out / "meta.json").read_text()) if (out / "meta.json").exists() else {}
    if {k: stored.get(k) for k in meta} == meta:
        return out
    text = corpus.read_text()
    tokenizer = CharTokenizer.load(model_dir / "tokenizer.json")
    ids = tokenizer.encode(text)
    table = build_strings(text, ids, 10, tokenizer.vocab_size, int(0.9 * len(ids)))
    rows = np.arange(len(table))
    if n_strings < len(table):
        rows = np.sort(np.random.default_rng(seed).choice(len(table), n_strings, replace=False))
    out.mkdir(parents=True, exist_ok=True)
    print(f"dumping {len(rows):,} of {len(table):,} strings into {out} (once)", flush=True)
    t = time.perf_counter()
    dump_activations(load_model(model_dir), tokenizer, [table.strings[i] for i in rows], out, [KIND], progress=False)
    np.save(out / "counts.npy", table.next_counts[rows])
    meta["total_strings"] = len(table)
    (out / "meta.json").write_text(json.dumps(meta))
    print(f"dumped in {time.perf_counter() - t:.0f} s", flush=True)
    return out


def sample_rows(n_rows: int, n: int, seed: int) -> np.ndarray:
    """A fixed random sample of ``n`` row indices (prompts are strings of the table: corpus mode)."""
    return np.random.default_rng(seed).choice(n_rows, min(n, n_rows), replace=False)


def orthonormal_columns(d_out: int, d_in: int, seed: int) -> np.ndarray:
    """Q [d_out d_in] with Q.T Q = I: x -> x @ Q.T keeps dot products and norms, hence cosines."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d_out, d_in)))
    return q


# ---------------------------------------------------------------- the naive way

def naive_block(prompts: np.ndarray, strings: np.ndarray, counts: np.ndarray,
                edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Dense float32 cosines, filtered at the first edge, then per prompt and edge a sum of counts.

    Returns ``(matches [prompts edges], summed [prompts edges vocab], dense_seconds)``, "cos > edge_k"
    form (cumulative), as the original code kept them; ``dense_seconds``: normalising and the matmul.
    """
    t = time.perf_counter()
    p = prompts / np.linalg.norm(prompts, axis=1, keepdims=True)
    s = strings / np.linalg.norm(strings, axis=1, keepdims=True)
    # torch's matmul, so both methods multiply with the same GEMM and threads
    cos = (torch.from_numpy(p) @ torch.from_numpy(s).T).numpy()  # [prompts strings] float32, all at once
    dense_seconds = time.perf_counter() - t
    matches = np.zeros((len(prompts), len(edges)), dtype=np.int64)
    summed = np.zeros((len(prompts), len(edges), counts.shape[1]), dtype=np.int64)
    for i in range(len(prompts)):
        idx = np.nonzero(cos[i] > edges[0])[0]
        sims = cos[i, idx]
        for k, edge in enumerate(edges):
            above = idx[sims > edge]
            matches[i, k] = len(above)
            summed[i, k] = counts[above].sum(axis=0)
    return matches, summed, dense_seconds


def cumulative_to_bins(above: np.ndarray, axis: int) -> np.ndarray:
    """From "cos > edge_k" to bins (edge_k, edge_k+1]: differences of neighbours; the last bin is open."""
    above = np.moveaxis(above, axis, -1)
    binned = above.copy()
    binned[..., :-1] -= above[..., 1:]
    return np.moveaxis(binned, -1, axis)


# ---------------------------------------------------------------- memory

def rss_kib(field: str) -> int:
    """``VmRSS`` (current) or ``VmHWM`` (peak) resident set size of this process, in KiB.

    VmHWM is the counter behind ru_maxrss, without the part ru_maxrss keeps from before exec: a
    spawned child's ru_maxrss starts at the parent's RSS at fork time."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def reset_peak_rss() -> None:
    """Make VmHWM start again from the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def ours_memory(n_prompts: int, n_strings: int, d: int, n_bins: int, vocab: int, pairs_density: float,
                prompt_chunk: int = 256, string_chunk: int = 32768) -> dict[str, float]:
    """Bytes ``search_block`` allocates beyond its inputs, from the arrays in src/tinylens/search.py.

    ``pairs_density`` is kept for the signature's sake: the fused kernel allocates nothing per candidate.
    """
    block = 4 * n_strings * d  # one float32 copy of the block's strings
    tile_pairs = prompt_chunk * min(string_chunk, n_strings)
    steady = {
        "unit copy of the strings (float32)": block,
        "string norms (float64)": 8 * n_strings,
        "int64 copy of the next-token counts (about 1.1 per string)": 9 * n_strings,
        "prompt unit copy and norms": n_prompts * (4 * d + 8),
        # float32 cosines + int64 columns of borderline pairs (sized for the worst case)
        "one tile": tile_pairs * (4 + 8),
        "bin accumulators (int64 matches and counts)": 8 * n_prompts * n_bins * (1 + vocab),
    }
    # _unit_float32 works in chunks of 65,536 rows, so its float64 scratch is small.
    transient = 65536 * d * 8
    return {"strings_block": block, "steady": sum(steady.values()), "steady_items": steady,
            "unit_transient": transient, "extra_peak": sum(steady.values()) + transient}


# ---------------------------------------------------------------- one method, in its own process

def run_method(method: str, data: str, blocks: list[int], threads: int, prompt_rows: np.ndarray,
               d_model: int = 64, project_to: int | None = None, seed: int = 0) -> dict:
    """Search ``blocks`` one at a time with ``method`` ("ours" or "naive"); runs in a spawned child.

    Per block, the inputs (prompts, strings, counts; for ``project_to``, mapped to that width) are
    loaded first, then the peak RSS is reset and only the search is timed and measured.
    """
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))  # the caller sets the kernel's threads
    counts = np.load(Path(data) / "counts.npy")
    q = orthonormal_columns(project_to, d_model, seed) if project_to else None
    t = time.perf_counter()
    csr = CountsCSR.from_dense(counts) if method == "ours" else None  # built once for all blocks
    seconds = time.perf_counter() - t  # the CSR build counts towards ours' time
    # CPU seconds (all threads) next to wall seconds show whether another process took the cores.
    dense_seconds, block_seconds, block_cpu_seconds = 0.0, [], []
    peak_kib = extra_kib = inputs_kib = 0
    matches, summed = [], []
    for b in blocks:
        strings = load_block(data, b, KIND, d_model, n_rows=len(counts))
        if q is not None:
            strings = (strings @ q.T).astype(np.float32)
        prompts = strings[prompt_rows]
        gc.collect()
        base = rss_kib("VmRSS")
        reset_peak_rss()
        t, cpu = time.perf_counter(), time.process_time()
        if method == "ours":
            m, c = search_block(prompts, strings, csr, EDGES)
        else:
            m, c, dense = naive_block(prompts, strings, counts, EDGES)
            dense_seconds += dense
        block_seconds.append(time.perf_counter() - t)
        block_cpu_seconds.append(time.process_time() - cpu)
        peak = rss_kib("VmHWM")
        if peak - base > extra_kib:
            peak_kib, extra_kib, inputs_kib = peak, peak - base, base
        matches.append(m)
        summed.append(c)
        del strings, prompts
    return {"seconds": seconds + sum(block_seconds), "block_seconds": block_seconds,
            "block_cpu_seconds": block_cpu_seconds,
            "dense_seconds": dense_seconds, "peak_mib": peak_kib / 1024, "extra_mib": extra_kib / 1024,
            "inputs_mib": inputs_kib / 1024, "pairs": len(prompt_rows) * len(counts) * len(blocks),
            "matches": np.stack(matches, axis=1), "counts": np.stack(summed, axis=1)}


def in_child(**kwargs) -> dict:
    """``run_method`` in a fresh spawned process, so its peak RSS is its own."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(run_method, **kwargs).result()


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strings", type=int, default=200_000, help="random sample of the 858,923 strings")
    parser.add_argument("--prompts", type=int, default=200, help="prompts, a random sample of those strings")
    parser.add_argument("--blocks", type=int, nargs="+", default=list(range(6)), help="blocks searched")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each method")
    parser.add_argument("--slice-prompts", type=int, default=256,
                        help="prompts of the d=384 projection slice (256 = one full prompt chunk)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", type=Path, required=True,
                        help="a trained model's folder, e.g. results/small/models/seed1337")
    parser.add_argument("--corpus", type=Path, required=True, help="TinyShakespeare's input.txt")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "tinylens-bench-search",
                        help="activation dumps, reused across runs (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    data = prepare_cache(args.cache, args.model, args.corpus, args.strings, args.seed)
    meta = json.loads((data / "meta.json").read_text())
    n_strings, vocab = np.load(data / "counts.npy", mmap_mode="r").shape
    prompt_rows = sample_rows(n_strings, args.prompts, args.seed + 1)
    common = {"data": str(data), "blocks": args.blocks, "threads": args.threads}

    ours = in_child(method="ours", prompt_rows=prompt_rows, **common)
    naive = in_child(method="naive", prompt_rows=prompt_rows, **common)
    naive_matches = cumulative_to_bins(naive["matches"], axis=2)
    naive_counts = cumulative_to_bins(naive["counts"], axis=2)
    cell_agrees = (naive_matches == ours["matches"]) & (naive_counts == ours["counts"]).all(axis=-1)
    ratio = naive["seconds"] / ours["seconds"]

    # Paper-scale projection: ours at d=384 on a slice with the real cosines.
    slice_rows = sample_rows(n_strings, args.slice_prompts, args.seed + 2)
    wide = in_child(method="ours", prompt_rows=slice_rows, project_to=PAPER["d_model"], seed=args.seed, **common)
    pairs_per_s = wide["pairs"] / wide["seconds"]
    paper_pairs = PAPER["prompts"] * PAPER["strings"] * PAPER["blocks"]
    density = ours["matches"].sum() / ours["pairs"]
    n_bins = len(EDGES)
    slice_model = ours_memory(len(slice_rows), n_strings, PAPER["d_model"], n_bins, vocab, density)
    paper_model = ours_memory(PAPER["prompts"], PAPER["strings"], PAPER["d_model"], n_bins, vocab, density)
    paper_inputs = paper_model["strings_block"] + PAPER["prompts"] * PAPER["d_model"] * 4
    naive_dense = PAPER["prompts"] * PAPER["strings"] * 4

    paper_seconds = paper_pairs / pairs_per_s
    matches_diff = int(np.abs(naive_matches - ours["matches"]).sum())
    device = f"{platform.machine()}, {os.cpu_count()} CPUs"

    print(f"{n_strings:,} strings (of {meta['total_strings']:,}), {len(prompt_rows)} prompts, blocks {args.blocks}, "
          f"{args.threads} threads, {len(EDGES)} edges from {EDGES[0]}; torch {torch.__version__}, "
          f"numpy {np.__version__}; {device}")
    print(f"matches above {EDGES[0]}: {density * n_strings:,.0f} per prompt and block ({density:.2%} of pairs)\n")
    print("| method | search time (s) | pairs/s | peak RSS (MiB) | above inputs (MiB) | result |")
    print("|---|---|---|---|---|---|")
    agree = ("identical" if cell_agrees.all() else f"{cell_agrees.mean():.2%} of (prompt, block, bin) cells "
             f"identical; match counts differ by {matches_diff} in all")
    for name, r, result in (("ours: `search_block` (exact)", ours, "reference"),
                            ("naive: dense float32 matrix + per-prompt loop", naive, agree)):
        matrix = f" (matrix {r['dense_seconds']:.2f})" if r["dense_seconds"] else ""
        print(f"| {name} | {r['seconds']:.2f}{matrix} | {r['pairs'] / r['seconds']:,.0f} | {r['peak_mib']:,.0f} "
              f"| {r['extra_mib']:,.0f} | {result} |")
    print(f"\nnaive / ours: {ratio:.1f}x time, {naive['extra_mib'] / ours['extra_mib']:.2f}x memory above inputs\n")
    print(f"| paper scale: {PAPER['prompts']:,} prompts x {PAPER['strings']:,} strings x {PAPER['blocks']} blocks, "
          f"d {PAPER['d_model']} | |")
    print("|---|---|")
    print(f"| ours, d=384 slice ({len(slice_rows)} prompts x {n_strings:,} strings x {len(args.blocks)} blocks) | "
          f"{wide['seconds']:.2f} s = {pairs_per_s:,.0f} pairs/s; peak RSS {wide['peak_mib']:,.0f} MiB, "
          f"{wide['extra_mib']:,.0f} MiB above inputs (size model: {slice_model['extra_peak'] / MIB:,.0f} MiB) |")
    print(f"| ours, projected time | {paper_seconds:,.0f} s = {paper_seconds / 60:.1f} min |")
    print(f"| ours, estimated peak memory per block | {(paper_inputs + paper_model['extra_peak']) / 1e9:.2f} GB = "
          f"{paper_inputs / 1e9:.2f} inputs + {paper_model['steady'] / 1e9:.2f} working arrays + "
          f"{paper_model['unit_transient'] / 1e9:.2f} normalising scratch |")
    print(f"| naive, dense float32 matrix per block | {naive_dense / 1e9:.1f} GB |")

    if args.json:
        def summary(r: dict) -> dict:
            return {k: v for k, v in r.items() if k not in ("matches", "counts")}

        args.json.write_text(json.dumps({
            "date": datetime.date.today().isoformat(), "device": device, "torch": torch.__version__,
            "numpy": np.__version__, "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "strings": int(n_strings), "total_strings": meta["total_strings"], "prompts": len(prompt_rows),
            "edges": EDGES.tolist(), "density_per_pair": float(density),
            "ours": summary(ours), "naive": summary(naive), "time_ratio": ratio,
            "agreement": {"identical": bool(cell_agrees.all()), "cell_fraction": float(cell_agrees.mean()),
                          "matches_abs_diff": matches_diff},
            "projection": {
                "slice": summary(wide) | {"prompts": len(slice_rows), "d_model": PAPER["d_model"],
                                          "pairs_per_s": pairs_per_s,
                                          "model_extra_mib": slice_model["extra_peak"] / MIB},
                "paper": PAPER, "ours_seconds": paper_seconds,
                "ours_memory_bytes": {"inputs": paper_inputs} | paper_model,
                "naive_dense_matrix_bytes": naive_dense,
            },
        }, indent=2))

if __name__ == "__main__":
    main()
