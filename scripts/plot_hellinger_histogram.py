"""Figure: histogram of per-prompt Hellinger distances, approximation and alternates (rule plot_hellinger_histogram)."""

from tinylens.approx import evaluation_columns
from tinylens.logs import log_to
from tinylens.plots import plot_hellinger_histogram

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    tables = {mode: evaluation_columns(path, p.alternates, p.n_blocks, split="eval")
              for mode, path in zip(p.modes, snakemake.input.tables, strict=True)}
    plot_hellinger_histogram(tables, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
