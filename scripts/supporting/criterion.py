"""The criterion per evaluation prompt and block, both subspace variants, with the chance levels
(rule criterion)."""

from pathlib import Path

import numpy as np

import tinylens.supporting.criterion as crit
from tinylens.core.activations import load_block
from tinylens.core.approx import block_alone_thresholds, load_sweep, summary_for_prompts
from tinylens.core.corpus import CharTokenizer
from tinylens.core.search import threshold_edges
from tinylens.core.strings import load_prompts
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.supporting.inputs import load_subspaces
from tinylens.supporting.schemas import criterion_schema
from tinylens.tables import write_table

with job(snakemake) as j:
    inp, out, p = j.input, j.output, j.params
    cfg, edges = load_config(inp.config), threshold_edges(**p.grid)
    vocab, k = CharTokenizer.load(inp.tokenizer).vocab, cfg.vocab_size // 2
    prompts = load_prompts(inp.prompts)
    _, counts = summary_for_prompts(inp.shards, prompts["prompt_id"], cfg.n_layer, len(edges), cfg.vocab_size)
    on_eval = np.asarray(prompts["split"]) == "eval"
    tuned, binned = j.read_json(inp.tuned), counts[on_eval]
    # Block b alone at its jointly tuned threshold, and at its own best one (method.md §6b): the summed next-token
    # counts of the strings above it (crit.block_alone_counts).
    own = edges[block_alone_thresholds(load_sweep(inp.sweep), edges, cfg.n_layer)]
    ffwd = [load_block(Path(inp.prompt_blocks[0]).parent, b, "ffwd_out", cfg.d_model, strings=prompts["string"])[on_eval]
            for b in range(cfg.n_layer)]
    subspaces = dict(load_subspaces(path, cfg.vocab_size, cfg.d_model) for path in inp.subspaces)
    directions, converged = crit.subspace_arrays(subspaces)
    prompt_ids = np.asarray(prompts["prompt_id"], dtype=np.int32)[on_eval]
    settings = crit.CriterionSettings(**p.settings)
    rows, blocks = crit.criterion_by_block(crit.block_alone_counts(binned, tuned["thresholds"], edges), ffwd,
                                           directions, prompt_ids, vocab, k, settings, converged)
    _, own_blocks = crit.criterion_by_block(crit.block_alone_counts(binned, own, edges), ffwd, directions, prompt_ids,
                                            vocab, k, settings, converged, variants=["end_of_model"])
    j.log.info("per block (0-based), joint thresholds: %s; each block's own %s: %s", blocks, own, own_blocks)
    aligned = crit.aligned_end_of_model(settings, prompt_ids, np.asarray(prompts["string"])[on_eval], ffwd, directions,
                                        vocab, converged)
    write_table(out.table, criterion_schema(), crit.criterion_columns(rows, p.mode))
    thresholds = {"joint": tuned["thresholds"], "block_alone": own.round(4).tolist()}
    j.write_json(out.summary, {**crit.criterion_summary(p.mode, k, cfg.vocab_size, settings, blocks), "aligned": aligned,
                               "thresholds": thresholds, "block_alone": own_blocks})
