"""Headline numbers of the circuits family (rule circuits_summary; external_circuits_summary, without the
symmetry test)."""


import polars as pl

from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.circuits.summary import summarize
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import read_table

with job(snakemake) as j:
    p, inp = j.params, j.input
    cfg = load_config(inp.config)
    final = pl.concat([pl.from_arrow(read_table(path, SCORES_SCHEMA)) for path in inp.scores])
    over = {seed: pl.from_arrow(read_table(path, SCORES_SCHEMA)) for seed, path in zip(p.seeds, inp.over_training)}
    symmetry = j.read_json(inp.symmetry)["transforms"] if inp.get("symmetry") else None
    if symmetry is None:
        j.log.info("no symmetry test among the inputs: metrics without it (symmetry_result says so)")
    rmsnorm = j.read_json(inp.rmsnorm) if inp.get("rmsnorm") else None  # the RMSNorm variant, where trained
    summary = summarize(final, over, symmetry, p.original, cfg.n_layer, cfg.n_head, cfg.d_model, p.top_pairs, rmsnorm)
    j.write_json(j.output.metrics, summary)
