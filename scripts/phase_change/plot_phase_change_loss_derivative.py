"""Figure: the reference run's first seed's loss derivative in log token index over training (rule plot_phase_change_loss_derivative)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_loss_derivative
from tinylens.phase_change.summary import load_runs

with job(snakemake) as j:
    inp, p = j.input, j.params
    run = j.read_json(inp.summary)["runs"][p.run]
    seed = str(run["setting"]["seeds"][0])
    curves, _ = load_runs([p.run], [inp.curves], [inp.heads], [inp.composition], {"runs": {p.run: run}})
    j.save_figure(make_loss_derivative(curves[p.run][seed], run["seeds"][seed], f"{p.run}, seed {seed}", p.smooth_decades))
