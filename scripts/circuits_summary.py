"""Headline numbers of the circuits family (rule circuits_summary)."""

import json
from pathlib import Path

import polars as pl

from tinylens.atomic import write_json
from tinylens.circuits.composition import SCORES_SCHEMA
from tinylens.circuits.summary import summarize
from tinylens.logs import log_to
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    final = pl.concat([pl.from_arrow(read_table(path, SCORES_SCHEMA)) for path in inp.scores])
    over = {seed: pl.from_arrow(read_table(path, SCORES_SCHEMA)) for seed, path in zip(p.seeds, inp.over_training)}
    symmetry = json.loads(Path(inp.symmetry).read_text())["transforms"]
    summary = summarize(final, over, symmetry, p.original, p.n_layer, p.n_head, p.d_model, p.top_pairs)
    write_json(snakemake.output.metrics, summary)
    log.info("wrote %s", snakemake.output.metrics)
