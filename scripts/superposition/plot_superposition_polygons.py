"""Figure: the uniform-sparsity sweep's learned columns, seeds x sparsities (rule plot_superposition_polygons)."""

from tinylens.jobs import job
from tinylens.superposition.plots import make_polygons
from tinylens.superposition.schemas import UNIFORM_FEATURES, UNIFORM_MODELS
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_polygons(read_columns(j.input.models, UNIFORM_MODELS),
                                read_columns(j.input.features, UNIFORM_FEATURES)))
