"""Similarity search: ours against the naive way and against a bare matrix multiply, in one run.

For the `small` shapes (d_model 64) and the paper shapes (d_model 384), both with all
858,923 strings, ``--prompts`` prompts (default 1,000) and 6 blocks, it times:

- **ours**: ``tinylens.core.search.search_block`` (exact: float32 tiles, re-checks, per-bin sums),
  with ``--threads`` worker threads;
- **bare GEMM**: a float32 matrix multiply of exactly the same shapes (prompts x strings x
  d_model, every block) with the same threads, nothing else: (b) the product in cache-sized tiles,
  one tile per thread at a time (how ours multiplies); with ``--full-gemm`` also (a) one
  ``torch.mm`` per block into a preallocated [prompts strings] output, ``--threads`` intra-op
  threads (slower here: it writes the whole matrix to memory). The faster is the floor the ratio
  is taken against;
- **ours, per candidate** (``--per-candidate``): the same search with the dense-row path switched
  off (``dense_fraction`` above 1: every row is binned candidate by candidate), to show what that
  path buys where most pairs are candidates (weakly trained models);
- **naive**, as the original research code did it: the dense float32 cosine matrix of all
  strings, filtered at 0.70, then per prompt and edge a numpy sum of the next-token counts (a
  Python loop); on ``--naive-prompts`` of the prompts (it is slow), timed per pair.

The methods take turns block by block inside one process, so a change in the machine's load
touches all of them alike; wall and CPU seconds are both reported, with the load average.
Exactness: ours against the float64 brute force on ``--check-prompts`` prompts of every block,
and against the naive way on its prompts (which differs only where float32 rounding moves a
cosine across an edge).

Inputs: a finished `small` run's strings and ``ffwd_out`` dumps (``--results``; prompts are a fixed
random sample of the strings, corpus mode). Paper shapes: the same activations mapped to 384
dimensions by a fixed matrix with orthonormal columns, which keeps every cosine (up to float32
rounding), so the matches are the real ones at the multiply cost of d_model 384; or, with
``--paper-results``, a run whose model has d_model 384 (e.g. the `paper` preset).

    python benchmarks/search.py                               # results/small, both shapes
    python benchmarks/search.py --shapes small --prompts 250 --json out.json
    python benchmarks/search.py --device cuda --paper-results results/paper --shapes paper --naive-prompts 0
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import torch

from tinylens.core.activations import load_block
from tinylens.core.search import (
    CountsCSR,
    _tile_matmul,
    exact_float32_matmul,
    search_block,
    search_block_bruteforce,
    threshold_edges,
)
from tinylens.core.strings import load_strings
from tinylens.model_config import load_config

EDGES = threshold_edges(0.70, 0.01, 30)
ORIGINAL = 1337
KIND = "ffwd_out"


# ---------------------------------------------------------------- inputs

def run_inputs(results: Path) -> dict:
    """Paths of a finished run: the string table, the original model's config and string dumps."""
    return {"strings": results / "strings" / "strings.parquet",
            "config": results / "models" / f"seed{ORIGINAL}" / "config.json",
            "dumps": results / "activations" / f"seed{ORIGINAL}" / "strings"}


def orthonormal_columns(d_out: int, d_in: int, seed: int) -> np.ndarray:
    """Q [d_out d_in] with Q.T Q = I: x -> x @ Q.T keeps dot products and norms, hence cosines."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d_out, d_in)))
    return q.astype(np.float32)


# ---------------------------------------------------------------- measuring

def rss_kib(field: str) -> int:
    """``VmRSS`` (current) or ``VmHWM`` (peak since the last reset) of this process, in KiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def reset_peak_rss() -> None:
    """Make VmHWM start again from the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def record(times: dict, method: str, stats: dict) -> None:
    for key, value in stats.items():
        times[method][key].append(value)


def measured(fn) -> tuple[object, dict]:
    """Run ``fn()``; its wall and CPU seconds (all threads) and its peak RSS above the RSS before."""
    gc.collect()
    base = rss_kib("VmRSS")
    reset_peak_rss()
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    stats = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
             "extra_mib": (rss_kib("VmHWM") - base) / 1024}
    return out, stats


# ---------------------------------------------------------------- the methods

def gemm_full(prompts: torch.Tensor, strings: torch.Tensor, out: torch.Tensor) -> None:
    """(a) one float32 product per block into a preallocated output, torch's intra-op threads."""
    with exact_float32_matmul():
        torch.mm(prompts, strings.T, out=out)


def gemm_tiled(prompts: torch.Tensor, strings: torch.Tensor, threads: int, prompt_chunk: int = 256,
               string_chunk: int = 4096) -> None:
    """(b) the same product in tiles, each worker thread multiplying its own prompt rows one tile at a
    time (one torch thread each), as ``search_block`` does; the tile is thrown away."""
    strings_t = strings.T

    def work(p0: int) -> None:
        a = prompts[p0 : p0 + prompt_chunk]
        for s0 in range(0, strings.shape[0], string_chunk):
            _tile_matmul(a, strings_t[:, s0 : s0 + string_chunk])

    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with exact_float32_matmul(), ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(0, prompts.shape[0], prompt_chunk)))
    finally:
        torch.set_num_threads(torch_threads)


def gemm_on_device(prompts: torch.Tensor, strings: torch.Tensor, string_chunk: int = 65536) -> None:
    """(b) on a GPU: the float32 product (no TF32) of device-resident inputs, in the tiles the GPU
    search uses, synchronised at the end."""
    with exact_float32_matmul():
        for s0 in range(0, strings.shape[0], string_chunk):
            _tile_matmul(prompts, strings[s0 : s0 + string_chunk].T)
    torch.cuda.synchronize()


def naive_block(prompts: np.ndarray, strings: np.ndarray, counts: np.ndarray,
                edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense float32 cosines, filtered at the first edge, then per prompt and edge a sum of counts.
    Returns ``(matches [prompts edges], summed [prompts edges vocab])``, "cos > edge_k" form."""
    p = prompts / np.linalg.norm(prompts, axis=1, keepdims=True)
    s = strings / np.linalg.norm(strings, axis=1, keepdims=True)
    with exact_float32_matmul():
        cos = (torch.from_numpy(p) @ torch.from_numpy(s).T).numpy()  # [prompts strings] float32
    matches = np.zeros((len(prompts), len(edges)), dtype=np.int64)
    summed = np.zeros((len(prompts), len(edges), counts.shape[1]), dtype=np.int64)
    for i in range(len(prompts)):
        idx = np.nonzero(cos[i] > edges[0])[0]
        sims = cos[i, idx]
        for k, edge in enumerate(edges):
            above = idx[sims > edge]
            matches[i, k] = len(above)
            summed[i, k] = counts[above].sum(axis=0)
    return matches, summed


def cumulative_to_bins(above: np.ndarray) -> np.ndarray:
    """From "cos > edge_k" (last axis) to bins (edge_k, edge_k+1]; the last bin is open."""
    binned = above.copy()
    binned[..., :-1] -= above[..., 1:]
    return binned


# ---------------------------------------------------------------- one shape

def run_shape(name: str, inputs: dict, prompt_rows: np.ndarray, args, project_to: int | None) -> dict:
    """Every method on every block of one shape, taking turns block by block."""
    cfg = load_config(inputs["config"])
    table = load_strings(inputs["strings"], cfg.vocab_size)
    counts = table.counts("corpus")
    csr = CountsCSR.from_dense(counts)
    q = orthonormal_columns(project_to, cfg.d_model, args.seed) if project_to else None
    d_model = project_to or cfg.d_model
    device = torch.device(args.device)
    naive_rows = prompt_rows[: args.naive_prompts]
    check = np.random.default_rng(args.seed + 3).choice(len(prompt_rows), args.check_prompts, replace=False)
    methods = ["ours"] + (["ours_per_candidate"] if args.per_candidate else [])
    methods += (["gemm_full"] if args.full_gemm else []) + ["gemm_tiled"]
    methods += ["naive"] if len(naive_rows) else []
    if args.only_ours:  # the search's own time at a scale where the references would take too long
        methods = ["ours"]
    times = {m: {"wall": [], "cpu": [], "extra_mib": []} for m in methods}
    agree = {"bruteforce": True, "naive_cells": 0, "naive_identical": 0}
    torch.set_num_threads(args.threads)
    warm = np.random.default_rng(0).normal(size=(300, d_model)).astype(np.float32)
    # compiles the kernels once
    search_block(warm[:3], warm, csr.take(np.arange(300)), EDGES, threads=args.threads, device=device)
    for b in range(cfg.n_layer):
        strings = load_block(inputs["dumps"], b, KIND, cfg.d_model, strings=table.strings)
        if q is not None:
            strings = strings @ q.T  # [strings 384], float32
        prompts = np.ascontiguousarray(strings[prompt_rows])
        strings = np.require(strings, requirements="W")  # torch wants writable arrays
        p_t, s_t = torch.from_numpy(prompts), torch.from_numpy(strings)
        # ours, then the GEMMs, then the references: the same order in every block
        (m, c), st = measured(partial(search_block, prompts, strings, csr, EDGES, threads=args.threads,
                                      device=device))
        record(times, "ours", st)
        if "ours_per_candidate" in times:
            (pm, pc), st = measured(partial(search_block, prompts, strings, csr, EDGES, threads=args.threads,
                                            device=device, dense_fraction=2.0))
            record(times, "ours_per_candidate", st)
            agree["bruteforce"] &= bool(np.array_equal(pm, m) and np.array_equal(pc, c))
        if "gemm_full" in times:
            out = torch.empty((len(prompts), len(strings)), dtype=torch.float32)
            record(times, "gemm_full", measured(partial(gemm_full, p_t, s_t, out))[1])
            del out
        if device.type == "cuda" and "gemm_tiled" in times:
            p_d, s_d = p_t.to(device), s_t.to(device)
            gemm_on_device(p_d, s_d)  # warm
            record(times, "gemm_tiled", measured(partial(gemm_on_device, p_d, s_d))[1])
            del p_d, s_d
        elif "gemm_tiled" in times:
            record(times, "gemm_tiled", measured(partial(gemm_tiled, p_t, s_t, args.threads))[1])
        if "naive" in times:
            (nm, nc), st = measured(partial(naive_block, prompts[: len(naive_rows)], strings, counts, EDGES))
            record(times, "naive", st)
            bins_m, bins_c = cumulative_to_bins(nm), cumulative_to_bins(np.moveaxis(nc, 1, 2))
            same = (bins_m == m[: len(naive_rows)]) & (np.moveaxis(bins_c, 2, 1) == c[: len(naive_rows)]).all(-1)
            agree["naive_cells"] += same.size
            agree["naive_identical"] += int(same.sum())
        em, ec = search_block_bruteforce(prompts[check], strings, counts, EDGES)
        agree["bruteforce"] &= bool(np.array_equal(em, m[check]) and np.array_equal(ec, c[check]))
        print(f"  {name} block {b}: " + ", ".join(f"{k} {t['wall'][-1]:.2f} s (CPU {t['cpu'][-1]:.1f})"
                                                   for k, t in times.items())
              + f" [naive: {len(naive_rows)} prompts]; load {os.getloadavg()[0]:.1f}", flush=True)
        del strings, prompts, p_t, s_t
    pairs = len(prompt_rows) * len(table) * cfg.n_layer
    total = {m: {k: float(np.sum(v)) if k != "extra_mib" else float(np.max(v)) for k, v in t.items()}
             for m, t in times.items()}
    if "naive" in total:
        total["naive_projected"] = {k: total["naive"][k] * len(prompt_rows) / len(naive_rows) for k in ("wall", "cpu")}
    gemms = [m for m in ("gemm_full", "gemm_tiled") if m in total] or ["ours"]
    bare = min(gemms, key=lambda k: total[k]["wall"])
    bare_cpu = min(gemms, key=lambda k: total[k]["cpu"])
    return {
        "shape": name, "d_model": d_model, "prompts": len(prompt_rows), "strings": len(table),
        "blocks": cfg.n_layer, "pairs": pairs, "threads": args.threads,
        "projected_from": cfg.d_model if q is not None else None, "naive_prompts": len(naive_rows),
        "times": total, "per_block": times, "bare_gemm": bare,
        "ratio_wall": total["ours"]["wall"] / total[bare]["wall"],
        "ratio_cpu": total["ours"]["cpu"] / total[bare_cpu]["cpu"],
        "naive_over_ours": total["naive_projected"]["wall"] / total["ours"]["wall"] if "naive" in total else None,
        "gemm_tflops": 2 * pairs * d_model / total[bare]["wall"] / 1e12,
        "matches_per_prompt_block": float(m.sum() / len(prompt_rows)),
        "matching_fraction": float(m.sum() / len(prompt_rows) / len(table)),  # of the last block's pairs
        "exact_vs_bruteforce": agree["bruteforce"], "check_prompts": len(check),
        "naive_identical_fraction": agree["naive_identical"] / max(agree["naive_cells"], 1),
    }


# ---------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results/small"),
                        help="a finished run (the small preset) whose strings and dumps are searched")
    parser.add_argument("--paper-results", type=Path, help="a finished run with d_model 384 for the paper shapes "
                        "(default: --results' activations mapped to 384 dimensions)")
    parser.add_argument("--shapes", nargs="+", default=["paper", "small"], choices=["paper", "small"])
    parser.add_argument("--prompts", type=int, default=1000, help="prompts (a fixed random sample of the strings)")
    parser.add_argument("--naive-prompts", type=int, default=20, help="of those, searched the naive way too")
    parser.add_argument("--full-gemm", action="store_true", help="also time the bare GEMM as one mm per block")
    parser.add_argument("--per-candidate", action="store_true", help="also time ours without the dense-row path")
    parser.add_argument("--only-ours", action="store_true", help="time the search alone (e.g. 20,000 prompts)")
    parser.add_argument("--check-prompts", type=int, default=10, help="of those, checked against float64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="where ours and the bare GEMM run (cpu or cuda)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    small = run_inputs(args.results)
    n_strings = len(load_strings(small["strings"], load_config(small["config"]).vocab_size))
    prompt_rows = np.sort(np.random.default_rng(args.seed + 1).choice(n_strings, args.prompts, replace=False))
    device = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    if args.device != "cpu":
        device += f", {torch.cuda.get_device_name()}"
    print(f"{device}; torch {torch.__version__}, numpy {np.__version__}; "
          f"load average at start {os.getloadavg()}", flush=True)
    rows = []
    for shape in args.shapes:
        if shape == "paper" and args.paper_results:
            rows.append(run_shape(shape, run_inputs(args.paper_results), prompt_rows, args, None))
        else:
            rows.append(run_shape(shape, small, prompt_rows, args, 384 if shape == "paper" else None))
    load_end = os.getloadavg()

    print(f"\nload average at the end {load_end}\n")
    print("| shapes | ours (s) | bare fp32 GEMM (s): tiled / one mm | naive (s, projected) "
          "| **ours / GEMM** wall (CPU) | naive / ours | exact |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        t = r["times"]
        naive = (f"{t['naive_projected']['wall']:,.0f} ({r['naive_prompts']} prompts: {t['naive']['wall']:.1f})"
                 if "naive" in t else "-")
        naive_ratio = f"{r['naive_over_ours']:.0f}x" if r["naive_over_ours"] else "-"
        if "gemm_tiled" not in t:
            print(f"| {r['shape']}: {r['prompts']:,} prompts, d_model {r['d_model']}, ours alone | "
                  f"{t['ours']['wall']:.1f} s ({t['ours']['cpu']:.1f} CPU-s) |")
            continue
        print(f"| {r['shape']}: {r['prompts']:,} prompts x {r['strings']:,} strings x {r['blocks']} blocks, "
              f"d_model {r['d_model']}{' (projected)' if r['projected_from'] else ''}"
              f"| {t['ours']['wall']:.1f} | {t['gemm_tiled']['wall']:.1f} / "
              f"{format(t['gemm_full']['wall'], '.1f') if 'gemm_full' in t else '-'} "
              f"({r['gemm_tflops']:.2f} TFLOP/s) | {naive} "
              f"| **{r['ratio_wall']:.2f}** ({r['ratio_cpu']:.2f}) | {naive_ratio} "
              f"| float64 on {r['check_prompts']} prompts: {'identical' if r['exact_vs_bruteforce'] else 'DIFFERENT'}; "
              f"naive: {r['naive_identical_fraction']:.2%} of cells |")
    for r in rows:
        t = r["times"]
        print(f"{r['shape']}: {r['matching_fraction']:.1%} of the last block's pairs above {EDGES[0]}"
              + (f"; ours without the dense-row path {t['ours_per_candidate']['wall']:.1f} s "
                 f"({t['ours_per_candidate']['cpu']:.1f} CPU-s), "
                 f"{t['ours_per_candidate']['wall'] / t['ours']['wall']:.2f}x ours" if "ours_per_candidate" in t else ""))
    print("\nmemory above the inputs (MiB, the largest block): "
          + "; ".join(f"{r['shape']}: ours {r['times']['ours']['extra_mib']:,.0f}"
                      + (f", tiled GEMM {r['times']['gemm_tiled']['extra_mib']:,.0f}" if "gemm_tiled" in r["times"] else "")
                      + (f", naive {r['times']['naive']['extra_mib']:,.0f} for {r['naive_prompts']} prompts"
                         if "naive" in r["times"] else "") for r in rows))
    if args.json:
        args.json.write_text(json.dumps({
            "date": datetime.date.today().isoformat(), "device": device, "torch": torch.__version__,
            "numpy": np.__version__, "load_end": load_end,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "shapes": rows,
        }, indent=2))


if __name__ == "__main__":
    main()
