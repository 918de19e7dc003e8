"""Figure: logit lens vs tuned lens by depth (rule plot_lens_curves)."""

from tinylens.attention.plots import make_lens_curves
from tinylens.jobs import job

with job(snakemake) as j:
    summary = j.read_json(j.input.summary)
    j.save_figure(make_lens_curves(summary["per_depth"], summary["vocab_size"]))
