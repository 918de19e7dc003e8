"""Exact similarity search of one prompt shard against every string, binned (rule search_shard)."""

from pathlib import Path

import numba
import numpy as np
import torch

from tinylens.activations import load_block
from tinylens.logs import log_to
from tinylens.model import ModelConfig
from tinylens.search import CountsCSR, search_prompts, threshold_edges, write_summary
from tinylens.strings import load_prompts, load_strings, prompt_shard

with log_to(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    torch.set_num_threads(snakemake.threads)
    numba.set_num_threads(min(snakemake.threads, numba.config.NUMBA_NUM_THREADS))
    cfg = ModelConfig.from_json(inp.model_config)
    table = load_strings(inp.strings, cfg.vocab_size)
    prompts = load_prompts(inp.prompts)
    rows = prompt_shard(len(prompts["prompt_id"]), p.n_shards, p.shard)
    ids = np.asarray(prompts["prompt_id"])[rows]
    log.info("%s mode, shard %d of %d: %d prompts (ids %s..%s) against %d strings, %d threads",
             p.mode, p.shard, p.n_shards, len(rows), ids.min(), ids.max(), len(table), snakemake.threads)
    members = table.members(p.mode)
    counts = CountsCSR.from_dense(table.counts(p.mode), members)
    prompt_dir, string_dir = Path(inp.prompt_logits).parent, Path(inp.string_logits).parent
    prompt_blocks = [load_block(prompt_dir, b, "ffwd_out", cfg.n_embed, n_rows=len(prompts["prompt_id"]))[rows]
                     for b in range(cfg.n_layer)]
    matches, summed = search_prompts(
        prompt_blocks, lambda b: load_block(string_dir, b, "ffwd_out", cfg.n_embed, n_rows=len(table)),
        counts, threshold_edges(**p.grid), members)
    write_summary(snakemake.output.shard, ids, matches, summed)
    log.info("wrote %s", snakemake.output.shard)
