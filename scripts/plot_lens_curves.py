"""Figure: logit lens vs tuned lens by depth (rule plot_lens_curves)."""

from tinylens.atomic import read_json
from tinylens.attention.plots import plot_lens_curves
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    summary = read_json(snakemake.input.summary)
    plot_lens_curves(summary["per_depth"], summary["vocab_size"], snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
