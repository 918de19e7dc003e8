"""Figure: the non-uniform sweep's geometry from each start across the odd feature's density
(rule plot_superposition_phase_change)."""

from tinylens.logs import log_to
from tinylens.superposition.plots import plot_phase_change
from tinylens.superposition.schemas import NONUNIFORM_FEATURES, NONUNIFORM_MODELS, read_columns

with log_to(snakemake.log[0]) as log:
    plot_phase_change(read_columns(snakemake.input.models, NONUNIFORM_MODELS),
                      read_columns(snakemake.input.features, NONUNIFORM_FEATURES), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
