"""Figure: D_i and D* against inverse density (rule plot_superposition_dimensionality)."""

from tinylens.logs import log_to
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import plot_dimensionality
from tinylens.superposition.schemas import DIMENSIONALITY_FEATURES, DIMENSIONALITY_MODELS, read_columns

with log_to(snakemake.log[0]) as log:
    plot_dimensionality(read_columns(snakemake.input.models, DIMENSIONALITY_MODELS),
                        read_columns(snakemake.input.features, DIMENSIONALITY_FEATURES),
                        parse_fractions(snakemake.params.fractions), snakemake.params.threshold,
                        snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
