"""Figure: mean Hellinger distance from the model by source of next-token counts, held-out prompts (rule
plot_controls, method.md §6b)."""

from tinylens.core.plots import make_controls
from tinylens.jobs import job

with job(snakemake) as j:
    j.save_figure(make_controls(j.read_json(j.input.metrics)))
