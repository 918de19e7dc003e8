"""Figure: the non-uniform sweep's geometry from each start across the odd feature's density
(rule plot_superposition_phase_change)."""

from tinylens.jobs import job
from tinylens.superposition.plots import make_phase_change
from tinylens.superposition.schemas import NONUNIFORM_FEATURES, NONUNIFORM_MODELS
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_phase_change(read_columns(j.input.models, NONUNIFORM_MODELS),
                                    read_columns(j.input.features, NONUNIFORM_FEATURES)))
