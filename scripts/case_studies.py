"""Full match lists and approximations of the case-study prompts (rule case_studies)."""

import json
from pathlib import Path

import numpy as np

from tinylens.activations import load_block
from tinylens.atomic import write_json
from tinylens.case_studies import MATCHES_SCHEMA, find_matches, prompt_activations, summarize
from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.strings import load_strings
from tinylens.tables import write_table
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    p, inp = snakemake.params, snakemake.input
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    table = load_strings(inp.strings, tokenizer.vocab_size)
    prompts = [s for s in p.prompts if len(s) == p.length and set(s) <= set(tokenizer.vocab)]
    if len(prompts) < len(p.prompts):
        log.warning("skipping case-study prompts that are not %d known characters: %s",
                    p.length, sorted(set(p.prompts) - set(prompts)))
    vectors, q = prompt_activations(model, tokenizer, prompts)
    string_dir = Path(inp.string_logits).parent
    matches = find_matches(vectors, lambda b: load_block(string_dir, b, "ffwd_out", model.config.n_embed,
                                                         n_rows=len(table)), p.min_cosine)
    tuned = json.loads(Path(inp.tuned).read_text())
    counts = table.counts("corpus")
    summaries = [summarize(prompt, q[i], [matches[b][i] for b in range(len(matches))], table.strings, counts,
                           tuned, tuned.get("paper_values")) for i, prompt in enumerate(prompts)]
    write_json(snakemake.output.summary, {"vocab": list(tokenizer.vocab), "case_studies": summaries})
    rows = [(prompt, b, table.strings[j], c) for i, prompt in enumerate(prompts)
            for b in range(len(matches)) for j, c in zip(*matches[b][i])]
    write_table(snakemake.output.matches, MATCHES_SCHEMA, {
        "prompt": [r[0] for r in rows], "block": np.array([r[1] for r in rows], dtype=np.int8),
        "string": [r[2] for r in rows], "cosine": np.array([r[3] for r in rows], dtype=np.float64)})
    for s in summaries:
        log.info("%r: tuned H %.3f with matches %s; block 0 only at 0.95: %s",
                 s["prompt"], s["tuned"]["hellinger"], s["tuned"]["matches"], s["block0_only"]["0.95"])
    log.info("wrote %d match rows to %s and %s", len(rows), snakemake.output.matches, snakemake.output.summary)
