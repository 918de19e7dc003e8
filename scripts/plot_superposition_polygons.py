"""Figure: the uniform-sparsity sweep's learned columns, seeds x sparsities (rule plot_superposition_polygons)."""

from tinylens.logs import log_to
from tinylens.superposition.plots import plot_polygons
from tinylens.superposition.schemas import UNIFORM_FEATURES, UNIFORM_MODELS, read_columns

with log_to(snakemake.log[0]) as log:
    plot_polygons(read_columns(snakemake.input.models, UNIFORM_MODELS),
                  read_columns(snakemake.input.features, UNIFORM_FEATURES), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
