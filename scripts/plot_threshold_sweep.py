"""Figure: mean Hellinger against the threshold, each block alone (rule plot_threshold_sweep)."""

import csv
import json
from pathlib import Path

import numpy as np

from tinylens.logs import log_to
from tinylens.plots import plot_threshold_sweep

with log_to(snakemake.log[0]) as log:
    sweeps, tuned = {}, {}
    for mode, sweep, tuned_path in zip(snakemake.params.modes, snakemake.input.sweeps, snakemake.input.tuned):
        with open(sweep, newline="") as f:
            rows = list(csv.DictReader(f))
        sweeps[mode] = {k: np.array([float(r[k]) for r in rows]) for k in ("block", "threshold", "mean_hellinger")}
        sweeps[mode]["block"] = sweeps[mode]["block"].astype(int)
        tuned[mode] = json.loads(Path(tuned_path).read_text())
    paper = snakemake.params.paper_thresholds
    plot_threshold_sweep(sweeps, tuned, paper if len(paper) == snakemake.params.n_blocks else None,
                         snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
