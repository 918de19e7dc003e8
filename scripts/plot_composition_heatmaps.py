"""Figure: composition score minus baseline of every head pair of the original model (rule plot_composition_heatmaps)."""

import polars as pl

from tinylens.circuits.composition import SCORES_SCHEMA
from tinylens.circuits.plots import plot_composition_heatmaps
from tinylens.logs import log_to
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    scores = pl.from_arrow(read_table(snakemake.input.scores, SCORES_SCHEMA))
    plot_composition_heatmaps(scores, snakemake.params.n_layer, snakemake.params.n_head, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
