"""Figure: the main runs' losses, ICL scores and best heads over training (rule plot_phase_change_curves)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_curves
from tinylens.phase_change.summary import load_runs

with job(snakemake) as j:
    inp, p = j.input, j.params
    summary = j.read_json(inp.summary)
    curves, heads = load_runs(p.runs, inp.curves, inp.heads, summary)
    runs = {name: summary["runs"][name] for name in p.runs}
    j.save_figure(make_curves(curves, heads, runs))
