"""Attention against feed-forward output per block over every evaluation prompt of each mode, from the
prompt dumps (rule block_contributions)."""

from pathlib import Path

import numpy as np

from tinylens.core.activations import load_block
from tinylens.core.strings import load_prompts
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.supporting.contributions import block_contributions, summarize_contributions
from tinylens.supporting.inputs import extend_columns
from tinylens.supporting.schemas import CONTRIBUTIONS_SCHEMA
from tinylens.tables import write_table

with job(snakemake) as j:
    inp, out = j.input, j.output
    cfg = load_config(inp.config)
    d, n_layer = cfg.d_model, cfg.n_layer
    columns: dict[str, list] = {}
    for i, (mode, table) in enumerate(zip(j.params.modes, inp.prompts, strict=True)):
        prompts = load_prompts(table)
        on_eval = np.asarray(prompts["split"]) == "eval"
        dump = Path(inp.prompt_blocks[i * n_layer]).parent  # the blocks are listed mode by mode
        vectors = {kind: [load_block(dump, b, kind, d, strings=prompts["string"])[on_eval] for b in range(n_layer)]
                   for kind in ("block_input", "sa_out", "ffwd_out")}
        cols = block_contributions(vectors["block_input"], vectors["sa_out"], vectors["ffwd_out"])
        ids = np.tile(np.asarray(prompts["prompt_id"], dtype=np.int32)[on_eval], n_layer)
        for row in summarize_contributions(cols, n_layer):
            j.log.info("%s mode, block %d: |ffwd|/|sa| median %s, ffwd longer %s, ffwd closer to the output %s", mode,
                       row["block"], row["norm_ratio"].get("median"), row["ffwd_longer"], row["ffwd_closer_to_output"])
        extend_columns(columns, {"mode": [mode] * len(ids), "prompt_id": ids, **cols})
    write_table(out.table, CONTRIBUTIONS_SCHEMA, columns)
    j.log.info("wrote %d rows to %s", len(columns["mode"]), out.table)
