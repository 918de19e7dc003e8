"""The paper's own prompt set, drawn as its code drew it (rule paper_prompts; method.md §12)."""

import numpy as np

from tinylens.corpus import CharTokenizer, load_ids
from tinylens.logs import log_to
from tinylens.strings import paper_prompts, save_prompts

with log_to(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    tokenizer = CharTokenizer.load(snakemake.input.tokenizer)
    ids = np.concatenate([load_ids(snakemake.input.train), load_ids(snakemake.input.val)])
    prompts = paper_prompts(tokenizer.decode(ids), ids, p.length, tokenizer.vocab_size, p.n_prompts, p.seed)
    save_prompts(out.prompts, prompts)
    log.info("paper mode: the first %d of the seed-%d permutation of the strings in first-occurrence order "
             "(first five %s) -> %s", len(prompts["string"]), p.seed, prompts["string"][:5], out.prompts)
