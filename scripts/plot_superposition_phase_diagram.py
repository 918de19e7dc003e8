"""Figure: the n = 2, m = 1 phase diagram, trained regimes with the analytic boundaries
(rule plot_superposition_phase_diagram)."""

from tinylens.logs import log_to
from tinylens.superposition.plots import plot_phase_diagram
from tinylens.superposition.schemas import PHASE_BOUNDARY, PHASE_CELLS, read_columns

with log_to(snakemake.log[0]) as log:
    plot_phase_diagram(read_columns(snakemake.input.cells, PHASE_CELLS),
                       read_columns(snakemake.input.boundary, PHASE_BOUNDARY), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
