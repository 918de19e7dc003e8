"""Figure: D_i and D* against inverse density (rule plot_superposition_dimensionality)."""

from tinylens.jobs import job
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import make_dimensionality
from tinylens.superposition.schemas import DIMENSIONALITY_FEATURES, DIMENSIONALITY_MODELS
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_dimensionality(read_columns(j.input.models, DIMENSIONALITY_MODELS),
                                      read_columns(j.input.features, DIMENSIONALITY_FEATURES),
                                      parse_fractions(j.params.fractions), j.params.threshold))
