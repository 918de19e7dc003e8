"""Figure: D_i over training for one sparsity, with the jumps found
(rule plot_superposition_dimensionality_training)."""

from tinylens.logs import log_to
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import plot_dimensionality_training
from tinylens.superposition.schemas import DIMENSIONALITY_JUMPS, DIMENSIONALITY_TRAINING, read_columns

with log_to(snakemake.log[0]) as log:
    plot_dimensionality_training(read_columns(snakemake.input.training, DIMENSIONALITY_TRAINING),
                                 read_columns(snakemake.input.jumps, DIMENSIONALITY_JUMPS), snakemake.params.sparsity,
                                 parse_fractions(snakemake.params.fractions), snakemake.params.threshold,
                                 snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
