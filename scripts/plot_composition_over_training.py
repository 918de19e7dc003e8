"""Figure: K-composition of the strongest pairs over training, every seed, with the training-dynamics
family's phase-change window of each seed shaded (rule plot_composition_over_training)."""

import json

import polars as pl

from tinylens.circuits.composition import SCORES_SCHEMA
from tinylens.circuits.plots import plot_composition_over_training
from tinylens.dynamics.summary import phase_change_windows
from tinylens.logs import log_to
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    over = {seed: pl.from_arrow(read_table(path, SCORES_SCHEMA)) for seed, path in zip(p.seeds, snakemake.input.tables)}
    with open(snakemake.input.dynamics) as f:
        windows = phase_change_windows(json.load(f))
    log.info("phase-change windows (steps) from %s: %s", snakemake.input.dynamics, windows)
    plot_composition_over_training(over, p.original, p.top_pairs, snakemake.output.figure, windows=windows)
    log.info("wrote %s", snakemake.output.figure)
