"""Check the streamed search against the dense float64 brute force on a seeded random sample of prompt ids
(rule verify_search)."""

from functools import partial
from pathlib import Path

from tinylens.core.activations import load_block
from tinylens.core.search import load_summary, threshold_edges
from tinylens.core.strings import load_prompts, load_strings
from tinylens.core.verification import sample_prompt_ids, verify_search
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    p, inp = j.params, j.input
    cfg = load_config(inp.config)
    edges = threshold_edges(**p.grid)
    table = load_strings(inp.strings, cfg.vocab_size)
    string_dir = Path(inp.string_logits).parent
    report = {}
    for mode in p.modes:
        ids, matches, counts = load_summary(inp[f"shards_{mode}"], cfg.n_layer, len(edges), cfg.vocab_size)
        prompts = load_prompts(inp[f"prompts_{mode}"])
        prompt_ids = prompts["prompt_id"]
        prompt_dir = Path(inp[f"prompt_logits_{mode}"]).parent
        sample = sample_prompt_ids(prompt_ids, p.n_prompts, p.seed, salt=mode)
        report[mode] = verify_search(
            sample, ids, matches, counts, prompt_ids,
            partial(load_block, prompt_dir, kind="ffwd_out", d_model=cfg.d_model, strings=prompts["string"]),
            partial(load_block, string_dir, kind="ffwd_out", d_model=cfg.d_model, strings=table.strings),
            table.counts(mode), edges, table.members(mode))
        j.log.info("%s mode: %d of %d prompts x %d strings x %d blocks re-checked: %s", mode, len(sample),
                   len(prompt_ids), len(table), cfg.n_layer,
                   "equal to the float64 brute force" if report[mode]["equal"]
                   else f"DIFFERENT for {report[mode]['mismatched_prompt_ids']}")
    j.write_json(j.output.report, report)
    different = {m: r["mismatched_prompt_ids"] for m, r in report.items() if not r["equal"]}
    if different:
        raise AssertionError(f"the search differs from the float64 brute force for prompt ids (by mode and block) "
                             f"{different}; please report this")
