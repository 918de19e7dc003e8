"""Figure: composition score minus baseline of every head pair of the original model (rule plot_composition_heatmaps;
external_plot_composition_heatmaps)."""

import polars as pl

from tinylens.circuits.plots import make_composition_heatmaps
from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import read_table

with job(snakemake) as j:
    cfg = load_config(j.input.config)
    scores = pl.from_arrow(read_table(j.input.scores, SCORES_SCHEMA))
    j.save_figure(make_composition_heatmaps(scores, cfg.n_layer, cfg.n_head))
