"""Figure: strongest composition per layer pair in every seed (rule plot_composition_across_seeds)."""


import polars as pl

from tinylens.circuits.plots import make_composition_across_seeds
from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import read_table

with job(snakemake) as j:
    p = j.params
    scores = pl.concat([pl.from_arrow(read_table(path, SCORES_SCHEMA)) for path in j.input.scores])
    across = j.read_json(j.input.metrics)["across_seeds"]
    j.save_figure(make_composition_across_seeds(scores, p.original, load_config(j.input.config).n_layer, across))
