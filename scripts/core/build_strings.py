"""Unique substrings with next-token counts, and the prompts of both modes (rule build_strings)."""

import numpy as np

from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.core.strings import build_strings, prompt_sets, save_prompts, save_strings
from tinylens.jobs import job

with job(snakemake) as j:
    p, out = j.params, j.output
    tokenizer = CharTokenizer.load(j.input.tokenizer)
    train, val = load_ids(j.input.train), load_ids(j.input.val)
    ids = np.concatenate([train, val])
    text = tokenizer.decode(ids)
    table = build_strings(text, ids, p.length, tokenizer.vocab_size, n_train=len(train))
    save_strings(out.strings, table)
    j.log.info("%d unique substrings of length %d (%d occur in the train text) -> %s",
               len(table), p.length, int(table.in_train.sum()), out.strings)
    for mode, prompts in prompt_sets(table, text[len(train):], p.length, p.n_prompts, p.tune_fraction, p.seed).items():
        save_prompts(out[f"prompts_{mode}"], prompts)
        j.log.info("%s mode: %d prompts (%d tune) -> %s", mode, len(prompts["string"]),
                   prompts["split"].count("tune"), out[f"prompts_{mode}"])
