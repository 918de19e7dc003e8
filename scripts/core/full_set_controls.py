"""The controls over every string (rule full_set_controls, method.md §6b): the suffix counts, no network (the
next-token counts of the text's strings that end in the prompt's last k characters, k = 1..K, weighted as the
blocks are), and the permuted null (the search's second count matrix: the strings' next-token counts permuted among
them); each tuned and evaluated as the approximation is."""

from pathlib import Path

import numpy as np

from tinylens.core.activations import load_logits
from tinylens.core.approx import initial_thresholds, softmax, summary_for_prompts, tune_and_evaluate
from tinylens.core.controls import evaluate_sources
from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.core.schemas import controls_schema
from tinylens.core.search import cumulative, threshold_edges
from tinylens.core.strings import load_prompts, searched_text
from tinylens.core.suffix import suffix_counts
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import write_table

with job(snakemake) as j:
    p, inp = j.params, j.input
    cfg, tokenizer, edges = load_config(inp.config), CharTokenizer.load(inp.tokenizer), threshold_edges(**p.grid)
    train = load_ids(inp.train)
    texts = {"train": train, "whole": np.concatenate([train, load_ids(inp.val)])}

    def load(mode):
        prompts = load_prompts(inp[f"prompts_{mode}"])
        ids = tokenizer.encode("".join(prompts["string"])).reshape(len(prompts["string"]), -1)
        suffix = suffix_counts(texts[searched_text(mode)], ids, p.suffix_lengths, cfg.vocab_size)
        _, null = summary_for_prompts(inp[f"null_{mode}"], prompts["prompt_id"], cfg.n_layer, len(edges), cfg.vocab_size)
        q = softmax(load_logits(Path(inp[f"logits_{mode}"]).parent, cfg.vocab_size, strings=prompts["string"]))
        # the suffix counts: one "threshold" per k, so only the weights are tuned
        return prompts, {"suffix": suffix[:, :, None, :], "null": cumulative(null, axis=2, out=null), "q": q}

    def fit(mode, arrays, splits):
        init = {"suffix": np.zeros(p.suffix_lengths, dtype=np.int64), "null": initial_thresholds(p.paper, edges, cfg.n_layer)}
        return {s: tune_and_evaluate(arrays[s], arrays["q"], splits, init[s], p.rounds) for s in ("suffix", "null")}

    tuned, columns = evaluate_sources(p.modes, p.tuned_with, load, fit)
    write_table(j.output.table, controls_schema(["suffix", "null"]), columns)
    j.write_json(j.output.tuned, {**tuned, "suffix_lengths": p.suffix_lengths, "null_seed": p.null_seed})
