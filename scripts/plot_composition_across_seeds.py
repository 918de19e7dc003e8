"""Figure: strongest composition per layer pair in every seed (rule plot_composition_across_seeds)."""

import json
from pathlib import Path

import polars as pl

from tinylens.circuits.composition import SCORES_SCHEMA
from tinylens.circuits.plots import plot_composition_across_seeds
from tinylens.logs import log_to
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    scores = pl.concat([pl.from_arrow(read_table(path, SCORES_SCHEMA)) for path in snakemake.input.scores])
    across = json.loads(Path(snakemake.input.metrics).read_text())["across_seeds"]
    plot_composition_across_seeds(scores, p.original, p.n_layer, across, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
