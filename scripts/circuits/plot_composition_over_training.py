"""Figure: K-composition of the strongest pairs over training, every seed, with the training-dynamics
family's phase-change window of each seed shaded (rule plot_composition_over_training)."""

import polars as pl

from tinylens.circuits.plots import make_composition_over_training
from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.dynamics.summary import phase_change_windows
from tinylens.jobs import job
from tinylens.tables import read_table

with job(snakemake) as j:
    p = j.params
    over = {seed: pl.from_arrow(read_table(path, SCORES_SCHEMA)) for seed, path in zip(p.seeds, j.input.tables)}
    windows = phase_change_windows(j.read_json(j.input.dynamics))
    j.log.info("phase-change windows (steps) from %s: %s", j.input.dynamics, windows)
    j.save_figure(make_composition_over_training(over, p.original, p.top_pairs, windows=windows))
