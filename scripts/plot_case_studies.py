"""Figure: model vs approximation for the case-study prompts, with their matching strings (rule plot_case_studies)."""

from tinylens.atomic import read_json
from tinylens.logs import log_to
from tinylens.plots import plot_case_studies

with log_to(snakemake.log[0]) as log:
    plot_case_studies(read_json(snakemake.input.summary), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
