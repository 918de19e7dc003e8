"""Figure: composition score minus baseline of every head pair of the original model (rule plot_composition_heatmaps)."""

import polars as pl

from tinylens.circuits.plots import make_composition_heatmaps
from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_table

with job(snakemake) as j:
    scores = pl.from_arrow(read_table(j.input.scores, SCORES_SCHEMA))
    j.save_figure(make_composition_heatmaps(scores, j.params.n_layer, j.params.n_head))
