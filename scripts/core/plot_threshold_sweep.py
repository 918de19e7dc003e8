"""Figure: mean Hellinger against the threshold, each block alone (rule plot_threshold_sweep)."""

from tinylens.core.approx import load_sweep
from tinylens.core.plots import make_threshold_sweep
from tinylens.jobs import job

with job(snakemake) as j:
    p, inp = j.params, j.input
    sweeps = {mode: load_sweep(path) for mode, path in zip(p.modes, inp.sweeps, strict=True)}
    tuned = {mode: j.read_json(path) for mode, path in zip(p.modes, inp.tuned, strict=True)}
    paper = p.paper_thresholds if len(p.paper_thresholds) == p.n_blocks else None
    j.save_figure(make_threshold_sweep(sweeps, tuned, paper))
