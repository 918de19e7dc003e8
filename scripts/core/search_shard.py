"""Exact similarity search of one prompt shard against every string, binned, with the permuted null's sums from the
same pass (rule search_shard)."""

import time
from pathlib import Path

import numpy as np

from tinylens.core.activations import load_block
from tinylens.core.search import CountsCSR, search_prompts_with_null, threshold_edges, write_summary
from tinylens.core.strings import load_prompts, load_strings, prompt_shard
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    p, inp = j.params, j.input
    cfg = load_config(inp.config)
    table = load_strings(inp.strings, cfg.vocab_size)
    prompts = load_prompts(inp.prompts)
    rows = prompt_shard(len(prompts["prompt_id"]), p.n_shards, p.shard)
    ids = np.asarray(prompts["prompt_id"])[rows]
    j.log.info("%s mode, shard %d of %d: %d prompts (ids %s..%s) against %d strings, on %s with %d threads",
               p.mode, p.shard, p.n_shards, len(rows), ids.min(), ids.max(), len(table), j.device, j.threads)
    members = table.members(p.mode)
    counts = CountsCSR.from_dense(table.counts(p.mode), members)
    prompt_dir, string_dir = Path(inp.prompt_logits).parent, Path(inp.string_logits).parent
    prompt_blocks = [load_block(prompt_dir, b, "ffwd_out", cfg.d_model, strings=prompts["string"])[rows]
                     for b in range(cfg.n_layer)]
    loading = []

    def string_block(b):
        start = time.perf_counter()
        block = load_block(string_dir, b, "ffwd_out", cfg.d_model, strings=table.strings)
        loading.append(time.perf_counter() - start)
        return block

    start = time.perf_counter()
    matches, summed, null = search_prompts_with_null(prompt_blocks, string_block, counts, threshold_edges(**p.grid),
                                                     members, p.null_seed, device=j.device, threads=j.threads)
    total = time.perf_counter() - start
    j.log.info("searched %d prompts x %d strings x %d blocks in %.1f s (+ %.1f s reading the string blocks)",
               len(rows), len(table), cfg.n_layer, total - sum(loading), sum(loading))
    write_summary(j.output.shard, ids, matches, summed)
    write_summary(j.output.null, ids, matches, null)
    j.wrote(j.output.shard, j.output.null)
