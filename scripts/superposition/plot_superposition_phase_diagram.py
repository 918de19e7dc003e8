"""Figure: the n = 2, m = 1 phase diagram, trained regimes with the analytic boundaries
(rule plot_superposition_phase_diagram)."""

from tinylens.jobs import job
from tinylens.superposition.plots import make_phase_diagram
from tinylens.superposition.schemas import PHASE_BOUNDARY, PHASE_CELLS
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_phase_diagram(read_columns(j.input.cells, PHASE_CELLS),
                                     read_columns(j.input.boundary, PHASE_BOUNDARY)))
