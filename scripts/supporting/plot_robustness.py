"""Figure: the approximation's mean Hellinger per variant (distance, string length) beside the default
(rule plot_robustness)."""

from tinylens.jobs import job
from tinylens.supporting.plots import make_robustness

with job(snakemake) as j:
    j.save_figure(make_robustness(j.read_json(j.input.summary)))
