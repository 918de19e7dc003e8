"""Figure: histogram of per-prompt Hellinger distances, approximation and alternates (rule plot_hellinger_histogram)."""

from tinylens.approx import evaluation_columns
from tinylens.logs import log_to
from tinylens.plots import plot_hellinger_histogram

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    tables = {mode: evaluation_columns(path, p.alternates, p.n_blocks, split="eval")
              for mode, path in zip(p.modes, snakemake.input.tables, strict=True)}
    # the paper's own prompts: its values too, the like-for-like histogram of the paper's figure
    plot_hellinger_histogram(tables, snakemake.output.figure, paper_values=[m for m in p.modes if m == "paper"])
    log.info("wrote %s", snakemake.output.figure)
