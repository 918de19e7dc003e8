"""Figure: mean Hellinger against the threshold, each block alone (rule plot_threshold_sweep)."""

from tinylens.approx import load_sweep
from tinylens.atomic import read_json
from tinylens.logs import log_to
from tinylens.plots import plot_threshold_sweep

with log_to(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    sweeps = {mode: load_sweep(path) for mode, path in zip(p.modes, inp.sweeps, strict=True)}
    tuned = {mode: read_json(path) for mode, path in zip(p.modes, inp.tuned, strict=True)}
    paper = p.paper_thresholds if len(p.paper_thresholds) == p.n_blocks else None
    plot_threshold_sweep(sweeps, tuned, paper, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
