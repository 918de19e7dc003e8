"""Figure: to-scale tip-to-tail sums for the case-study prompts (rule plot_vector_sums)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.supporting.plots import plot_vector_sums

with log_to(snakemake.log[0]) as log:
    plot_vector_sums(json.loads(Path(snakemake.input.paths).read_text())["prompts"], snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
