"""The superposition family's sweeps: batched (every setting and seed in one stack) vs one model at a time.

For each sweep of a preset (method.md §11; config `presets.<preset>.superposition`) this times
``tinylens.superposition.experiments.run_*`` as the workflow runs it (one stack of models), and the
same training done one model at a time (``train`` on a stack of one, same settings; a sample of
``--naive-models`` models, extrapolated to the whole sweep), training only on both sides. Wall and
CPU time are both given; CPU time is the steadier figure on a shared machine. With ``--out`` it also
writes the sweeps' tables, ``superposition.json`` and the figures there, so a preset can be run
where Snakemake is not installed and its numbers compared.

    python benchmarks/superposition.py --preset small --threads 1
    python benchmarks/superposition.py --preset paper --device cuda --naive-models 0 --out /tmp/paper
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
import yaml

from tinylens.atomic import write_json
from tinylens.config import resolve_preset
from tinylens.devices import select_device
from tinylens.plots import save_figure
from tinylens.superposition import plots
from tinylens.superposition.experiments import (
    log_grid,
    run_dimensionality,
    run_nonuniform,
    run_phase_diagram,
    run_uniform,
    train_settings,
)
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.model import train
from tinylens.superposition.regimes import pair_settings
from tinylens.superposition.schemas import TABLES
from tinylens.superposition.summary import SummarySettings, summarize_tables, summary_settings
from tinylens.tables import read_columns, write_table

REPO = Path(__file__).resolve().parents[1]
SWEEPS = ("uniform", "nonuniform", "dimensionality", "phase_diagram")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(device, fn, /, *args, **kwargs):
    """fn(*args, **kwargs), its wall and CPU seconds (``device``, positional only, is the one to synchronise;
    fn may take a ``device=`` of its own)."""
    sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    sync(device)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def one_at_a_time(imp, dens, hidden, settings, seed, device, pick):
    return [train(imp[i:i + 1].contiguous(), dens[i:i + 1].contiguous(), hidden, settings, seed, device=device)
            for i in pick]


def stack_settings(name: str, spec: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
    """importance, density [models features] and hidden size of a sweep's stack (for the one-at-a-time runs)."""
    if name == "uniform":
        S = np.repeat(spec["sparsities"], spec["seeds"])
        dens = torch.tensor(1 - S, dtype=torch.float32)[:, None].expand(-1, spec["features"])
        imp = (spec["importance_decay"] ** torch.arange(spec["features"], dtype=torch.float32)).expand(len(S), -1)
        return imp, dens, 2
    if name == "nonuniform":
        rel = log_grid(spec["relative_density"])
        p = 1 - spec["fixed_sparsity"]
        dens = torch.full((len(rel), 5), p)
        dens[:, 4] = torch.tensor(np.clip(rel * p, None, 1.0), dtype=torch.float32)
        dens = dens.repeat(2 + spec["random_seeds"], 1)
        return torch.ones_like(dens), dens, 2
    if name == "dimensionality":
        S = np.asarray(spec["sparsities"])
        dens = torch.tensor(1 - S, dtype=torch.float32)[:, None].expand(-1, spec["features"])
        return torch.ones_like(dens), dens, spec["hidden"]
    R, P = np.meshgrid(log_grid(spec["importance"]), log_grid(spec["density"]), indexing="ij")
    imp, dens = pair_settings(np.repeat(R.ravel(), spec["seeds"]), np.repeat(P.ravel(), spec["seeds"]))
    return imp, dens, 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sweeps", nargs="*", default=list(SWEEPS), choices=SWEEPS)
    ap.add_argument("--naive-models", type=int, default=4, help="models trained one at a time per sweep (0: skip)")
    ap.add_argument("--out", type=Path, help="write tables, superposition.json and figures here")
    ap.add_argument("--json", type=Path, help="write the timings here")
    ap.add_argument("--drop-training-table", action="store_true",
                    help="delete the (large) D_i-over-training table from --out once the figures are drawn")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    spec = resolve_preset(config, args.preset)["superposition"]
    defs = config["superposition"]
    fractions = parse_fractions(defs["fractions"])
    seed, thr = spec["seed"], defs["represented_norm"]
    runs = {
        "uniform": lambda s: run_uniform(s["features"], s["sparsities"], s["seeds"], s["importance_decay"], s, seed,
                                         thr, device),
        "nonuniform": lambda s: run_nonuniform(s["fixed_sparsity"], log_grid(s["relative_density"]),
                                               s["random_seeds"], s, seed, thr, device),
        "dimensionality": lambda s: run_dimensionality(
            s["features"], s["hidden"], s["sparsities"], s, s["snapshots"], fractions, defs["tolerance"],
            sorted({*fractions, Fraction(0)}, reverse=True), defs["jumps"], seed, thr, device),
        "phase_diagram": lambda s: run_phase_diagram(log_grid(s["importance"]), log_grid(s["density"]), s["seeds"],
                                                     s, seed, s["analytic_rows"], thr, device),
    }
    report = {"preset": args.preset, "device": str(device), "threads": args.threads, "torch": torch.__version__,
              "machine": platform.processor() or platform.machine(),
              "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None, "sweeps": {}}
    outputs = {}
    for name in args.sweeps:
        s = spec[name]
        imp, dens, hidden = stack_settings(name, s)
        n_models = len(imp)
        out, wall, cpu = timed(device, runs[name], s)
        outputs[name] = out
        row = {"models": n_models, "features": imp.shape[1], "hidden": hidden, "steps": s["steps"],
               "batch_size": s["batch_size"], "sweep_wall_s": wall, "sweep_cpu_s": cpu}
        if args.naive_models:
            # training alone, so both sides count the same work (the sweep also evaluates, classifies and,
            # for the phase diagram, finds the analytic boundary)
            settings = train_settings(s)
            _, wb, cb = timed(device, train, imp.contiguous(), dens.contiguous(), hidden, settings, seed,
                              device=device)
            pick = np.linspace(0, n_models - 1, min(args.naive_models, n_models)).round().astype(int)
            _, w1, c1 = timed(device, one_at_a_time, imp, dens, hidden, settings, seed, device, pick)
            k = n_models / len(pick)
            row.update(batched_train_wall_s=wb, batched_train_cpu_s=cb, naive_models_timed=len(pick),
                       naive_wall_s_projected=w1 * k, naive_cpu_s_projected=c1 * k,
                       speedup_wall=w1 * k / wb, speedup_cpu=c1 * k / cb)
        report["sweeps"][name] = row
        print(json.dumps({name: row}), flush=True)
    report["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.out and set(outputs) == set(SWEEPS):
        tables = {f"{sweep}_{part}" if sweep != "phase_diagram" else f"phase_{part}": cols
                  for sweep, out in outputs.items() for part, cols in out.items()}
        tables["dimensionality_jumps"] = tables.pop("dimensionality_jumps", outputs["dimensionality"]["jumps"])
        for stem, cols in tables.items():
            write_table(args.out / f"superposition/{stem}.parquet", TABLES[stem], cols)
        metrics = summarize_tables(tables, SummarySettings(**summary_settings(spec, defs)))
        write_json(args.out / "superposition.json", {"preset": args.preset, **metrics})
        t = {stem: read_columns(args.out / f"superposition/{stem}.parquet", TABLES[stem]) for stem in tables}
        fig = args.out / "figures"
        crossing = metrics["phase_change"]["crossing_relative_density"]
        figures = {
            "polygons": plots.make_polygons(t["uniform_models"], t["uniform_features"]),
            "phase_change": plots.make_phase_change(t["nonuniform_models"], t["nonuniform_features"]),
            "loss_crossing": plots.make_loss_crossing(
                t["nonuniform_models"], crossing if isinstance(crossing, float) else None,
                spec["nonuniform"]["fixed_sparsity"]),
            "dimensionality": plots.make_dimensionality(t["dimensionality_models"], t["dimensionality_features"],
                                                        fractions, thr),
            "fraction_histogram": plots.make_fraction_histogram(t["dimensionality_features"], fractions,
                                                                defs["tolerance"], thr, metrics["dimensionality"]),
            "dimensionality_training": plots.make_dimensionality_training(
                t["dimensionality_training"], t["dimensionality_jumps"], spec["dynamics_sparsity"], fractions, thr),
            "phase_diagram": plots.make_phase_diagram(t["phase_cells"], t["phase_boundary"]),
        }
        for name, figure in figures.items():
            save_figure(figure, fig / f"superposition_{name}.png")
        print(json.dumps(metrics["headline"], indent=1))
        if args.drop_training_table:
            (args.out / "superposition/dimensionality_training.parquet").unlink()
    if args.json:
        write_json(args.json, report)


if __name__ == "__main__":
    main()
