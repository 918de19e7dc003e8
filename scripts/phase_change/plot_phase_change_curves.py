"""Figure: the reference run's seeds: losses, ICL scores, best head, mechanism over training (rule plot_phase_change_curves)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_curves
from tinylens.phase_change.summary import load_runs

with job(snakemake) as j:
    inp, p = j.input, j.params
    summary = j.read_json(inp.summary)
    curves, heads = load_runs([p.run], inp.curves, inp.heads, inp.composition, summary)
    j.save_figure(make_curves(curves[p.run], heads[p.run], summary["runs"][p.run], p.run))
