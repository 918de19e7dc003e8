"""Figure: model vs approximation for the case-study prompts, with their matching strings (rule plot_case_studies)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.plots import plot_case_studies

with log_to(snakemake.log[0]) as log:
    plot_case_studies(json.loads(Path(snakemake.input.summary).read_text()), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
