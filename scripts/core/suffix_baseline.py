"""The suffix-count baseline, no network: the next-token counts of the text's strings that end in the prompt's last
k characters, k = 1..K, weighted as the blocks are, tuned and evaluated as the approximation is (rule
suffix_baseline, method.md §6b)."""

from pathlib import Path

import numpy as np

from tinylens.core.activations import load_logits
from tinylens.core.approx import softmax, tune_and_evaluate
from tinylens.core.controls import evaluate_sources
from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.core.schemas import controls_schema
from tinylens.core.strings import load_prompts, searched_text
from tinylens.core.suffix import suffix_counts
from tinylens.jobs import job
from tinylens.tables import write_table

with job(snakemake) as j:
    p, inp = j.params, j.input
    tokenizer = CharTokenizer.load(inp.tokenizer)
    train = load_ids(inp.train)
    texts = {"train": train, "whole": np.concatenate([train, load_ids(inp.val)])}

    def load(mode):
        prompts = load_prompts(inp[f"prompts_{mode}"])
        ids = tokenizer.encode("".join(prompts["string"])).reshape(len(prompts["string"]), -1)
        counts = suffix_counts(texts[searched_text(mode)], ids, p.suffix_lengths, tokenizer.vocab_size)
        q = softmax(load_logits(Path(inp[f"logits_{mode}"]).parent, tokenizer.vocab_size, strings=prompts["string"]))
        return prompts, {"above": counts[:, :, None, :], "q": q}  # one "threshold" per k: only the weights are tuned

    def fit(mode, arrays, splits):
        init = np.zeros(p.suffix_lengths, dtype=np.int64)
        return {"suffix": tune_and_evaluate(arrays["above"], arrays["q"], splits, init, p.rounds)}

    tuned, columns = evaluate_sources(p.modes, p.tuned_with, load, fit)
    write_table(j.output.table, controls_schema(["suffix"]), columns)
    j.write_json(j.output.tuned, {**tuned, "suffix_lengths": p.suffix_lengths})
