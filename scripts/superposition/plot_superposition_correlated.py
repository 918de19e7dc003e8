"""Figure: the feature-group models' columns and their pairs' cosines by correlation type
(rule plot_superposition_correlated)."""

from tinylens.jobs import job
from tinylens.superposition.plots import make_correlated
from tinylens.superposition.schemas import CORRELATED_FEATURES, CORRELATED_MODELS, CORRELATED_PAIRS
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_correlated(read_columns(j.input.models, CORRELATED_MODELS),
                                  read_columns(j.input.features, CORRELATED_FEATURES),
                                  read_columns(j.input.pairs, CORRELATED_PAIRS)))
