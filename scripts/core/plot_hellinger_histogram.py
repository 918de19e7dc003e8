"""Figure: histogram of per-prompt Hellinger distances, approximation and alternates (rule plot_hellinger_histogram)."""

from tinylens.core.approx import evaluation_columns
from tinylens.core.plots import make_hellinger_histogram
from tinylens.jobs import job

with job(snakemake) as j:
    p = j.params
    tables = {mode: evaluation_columns(path, p.alternates, p.n_blocks, split="eval")
              for mode, path in zip(p.modes, j.input.tables, strict=True)}
    # the paper's own prompts: its values too, the like-for-like histogram of the paper's figure
    j.save_figure(make_hellinger_histogram(tables, paper_values=[m for m in p.modes if m == "paper"]))
