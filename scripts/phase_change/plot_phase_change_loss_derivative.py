"""Figure: the reference run's loss derivative in log token index over training (rule plot_phase_change_loss_derivative)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_loss_derivative
from tinylens.phase_change.summary import load_run

with job(snakemake) as j:
    inp, p = j.input, j.params
    run = j.read_json(inp.summary)["runs"][p.run]
    curves, _ = load_run(inp.curves, inp.heads, run["setting"]["context"])
    j.save_figure(make_loss_derivative(curves, run, p.run, p.smooth_decades))
