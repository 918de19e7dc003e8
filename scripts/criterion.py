"""The criterion per evaluation prompt and block, both subspace variants, with the chance levels
(rule criterion)."""

from pathlib import Path

import numpy as np

from tinylens.activations import load_block
from tinylens.approx import grid_index, select_thresholds, summary_for_prompts
from tinylens.atomic import read_json, write_json
from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.model import ModelConfig
from tinylens.search import cumulative, threshold_edges
from tinylens.strings import load_prompts
from tinylens.supporting.criterion import criterion_by_block
from tinylens.supporting.inputs import load_subspaces
from tinylens.supporting.schemas import criterion_schema
from tinylens.tables import write_table

with log_to(snakemake.log[0]) as log:
    inp, out, p = snakemake.input, snakemake.output, snakemake.params
    cfg = ModelConfig.from_json(inp.model_config)
    vocab = CharTokenizer.load(inp.tokenizer).vocab
    k = cfg.vocab_size // 2
    edges = threshold_edges(**p.grid)
    prompts = load_prompts(inp.prompts)
    _, counts = summary_for_prompts(inp.shards, prompts["prompt_id"], cfg.n_layer, len(edges), cfg.vocab_size)
    on_eval = np.asarray(prompts["split"]) == "eval"
    tuned = read_json(inp.tuned)
    # Block b alone at its tuned threshold: the summed next-token counts of the strings above it.
    alone = select_thresholds(cumulative(counts[on_eval], axis=2), grid_index(tuned["thresholds"], edges))
    prompt_dir = Path(inp.prompt_blocks[0]).parent
    ffwd = [load_block(prompt_dir, b, "ffwd_out", cfg.n_embed, strings=prompts["string"])[on_eval]
            for b in range(cfg.n_layer)]
    subspaces = dict(load_subspaces(path, cfg.vocab_size, cfg.n_embed) for path in inp.subspaces)
    directions = {stage: t["direction"].astype(np.float64) for stage, t in subspaces.items()}
    log.info("%s mode: %d evaluation prompts, tuned thresholds %s, subspaces at stages %s, k = %d", p.mode,
             int(on_eval.sum()), tuned["thresholds"], sorted(directions), k)

    prompt_ids = np.asarray(prompts["prompt_id"], dtype=np.int32)[on_eval]
    rows, blocks = criterion_by_block(alone, ffwd, directions, prompt_ids, vocab, k, p.truncate_mass, p.top_mass,
                                      p.permutations, p.seed)
    for b, variants in blocks.items():
        for variant, entry in variants.items():
            log.info("block %d, %s subspaces (stage %d): %s", int(b) + 1, variant, entry["stage"], entry)
    summary = {"mode": p.mode, "k": k, "vocab": cfg.vocab_size, "truncate_mass": p.truncate_mass,
               "top_mass": p.top_mass, "permutations": p.permutations, "blocks": blocks}
    write_table(out.table, criterion_schema(), {
        **rows, "mode": [p.mode] * len(rows["prompt_id"]), "block": np.asarray(rows["block"], dtype=np.int8),
        "stage": np.asarray(rows["stage"], dtype=np.int8), "top_n": np.asarray(rows["top_n"], dtype=np.int16)})
    write_json(out.summary, summary)
    log.info("wrote %s and %s", out.table, out.summary)
