"""Check the streamed search against the dense float64 brute force on a random sample of prompts (rule verify_search)."""

from pathlib import Path

import numpy as np

from tinylens.activations import load_block
from tinylens.atomic import write_json
from tinylens.logs import log_to
from tinylens.model import ModelConfig
from tinylens.search import load_summary, search_block_bruteforce, threshold_edges
from tinylens.strings import load_prompts, load_strings

with log_to(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    cfg = ModelConfig.from_json(inp.model_config)
    edges = threshold_edges(**p.grid)
    table = load_strings(inp.strings, cfg.vocab_size)
    string_dir = Path(inp.string_logits).parent
    report = {}
    for mode, shards, prompt_logits in zip(p.modes, [inp.corpus_shards, inp.heldout_shards], inp.prompt_logits):
        ids, matches, counts = load_summary(shards, cfg.n_layer, len(edges), cfg.vocab_size)
        n = len(load_prompts(inp[f"prompts_{mode}"])["prompt_id"])
        sample = np.sort(np.random.default_rng(p.seed).choice(n, size=min(p.n_prompts, n), replace=False))
        members = table.members(mode)
        prompt_dir = Path(prompt_logits).parent
        for b in range(cfg.n_layer):
            strings = load_block(string_dir, b, "ffwd_out", cfg.n_embed, n_rows=len(table))
            prompts = load_block(prompt_dir, b, "ffwd_out", cfg.n_embed)[sample]
            expected_matches, expected_counts = search_block_bruteforce(prompts, strings, table.counts(mode), edges, members)
            row = np.searchsorted(ids, sample)
            if not (np.array_equal(matches[row, b], expected_matches) and np.array_equal(counts[row, b], expected_counts)):
                bad = np.nonzero((matches[row, b] != expected_matches).any(axis=1))[0]
                raise AssertionError(f"{mode} mode, block {b}: the search differs from the float64 brute force "
                                     f"for prompts {sample[bad][:10].tolist()}; please report this")
            log.info("%s mode, block %d: %d prompts x %d strings equal the float64 brute force",
                     mode, b, len(sample), len(strings))
        report[mode] = {"prompts_checked": len(sample), "prompts": n, "blocks": cfg.n_layer,
                        "strings": len(table), "equal": True}
    write_json(snakemake.output.report, report)
    log.info("wrote %s", snakemake.output.report)
