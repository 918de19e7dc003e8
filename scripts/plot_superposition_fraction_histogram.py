"""Figure: histogram of D_i against the simple fractions (rule plot_superposition_fraction_histogram)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import plot_fraction_histogram
from tinylens.superposition.schemas import DIMENSIONALITY_FEATURES, read_columns

with log_to(snakemake.log[0]) as log:
    summary = json.loads(Path(snakemake.input.metrics).read_text())["dimensionality"]
    plot_fraction_histogram(read_columns(snakemake.input.features, DIMENSIONALITY_FEATURES),
                            parse_fractions(snakemake.params.fractions), summary["tolerance"],
                            snakemake.params.threshold, summary, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
