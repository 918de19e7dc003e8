"""Figure: every run's seeds against training tokens, the dose and width curves (rule plot_phase_change_controls)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_controls
from tinylens.phase_change.summary import load_runs

with job(snakemake) as j:
    inp, p = j.input, j.params
    summary = j.read_json(inp.summary)
    curves, heads = load_runs(p.runs, inp.curves, inp.heads, inp.composition, summary)
    runs = {name: summary["runs"][name] for name in p.runs}
    j.save_figure(make_controls(curves, heads, runs, summary["dose"], summary["width"]))
