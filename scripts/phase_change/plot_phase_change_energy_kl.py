"""Figure: seed 000's interaction energy and KL to the unigram for several widths (rule plot_phase_change_energy_kl)."""

from tinylens.jobs import job
from tinylens.phase_change.plots import make_energy_kl
from tinylens.phase_change.summary import load_runs

with job(snakemake) as j:
    inp, p = j.input, j.params
    summary = j.read_json(inp.summary)
    curves, _ = load_runs(p.runs, inp.curves, inp.heads, inp.composition, summary)
    j.save_figure(make_energy_kl(curves, {name: summary["runs"][name] for name in p.runs}))
