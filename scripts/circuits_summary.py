"""Headline numbers of the circuits family (rule circuits_summary)."""


import polars as pl

from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.circuits.summary import summarize
from tinylens.jobs import job
from tinylens.tables import read_table

with job(snakemake) as j:
    p, inp = j.params, j.input
    final = pl.concat([pl.from_arrow(read_table(path, SCORES_SCHEMA)) for path in inp.scores])
    over = {seed: pl.from_arrow(read_table(path, SCORES_SCHEMA)) for seed, path in zip(p.seeds, inp.over_training)}
    symmetry = j.read_json(inp.symmetry)["transforms"]
    summary = summarize(final, over, symmetry, p.original, p.n_layer, p.n_head, p.d_model, p.top_pairs)
    j.write_json(j.output.metrics, summary)
