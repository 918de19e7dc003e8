"""Figure: D_i over training for one sparsity, with the jumps found
(rule plot_superposition_dimensionality_training)."""

from tinylens.jobs import job
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import make_dimensionality_training
from tinylens.superposition.schemas import DIMENSIONALITY_JUMPS, DIMENSIONALITY_TRAINING
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_dimensionality_training(read_columns(j.input.training, DIMENSIONALITY_TRAINING),
                                               read_columns(j.input.jumps, DIMENSIONALITY_JUMPS), j.params.sparsity,
                                               parse_fractions(j.params.fractions), j.params.threshold))
