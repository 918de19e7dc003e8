"""The paper's own prompt set, drawn as its code drew it (rule paper_prompts; method.md §12)."""

import numpy as np

from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.core.strings import paper_prompts, save_prompts
from tinylens.jobs import job

with job(snakemake) as j:
    p, out = j.params, j.output
    tokenizer = CharTokenizer.load(j.input.tokenizer)
    ids = np.concatenate([load_ids(j.input.train), load_ids(j.input.val)])
    prompts = paper_prompts(tokenizer.decode(ids), ids, p.length, tokenizer.vocab_size, p.n_prompts, p.seed)
    save_prompts(out.prompts, prompts)
    j.log.info("paper mode: the first %d of the seed-%d permutation of the strings in first-occurrence order "
               "(first five %s) -> %s", len(prompts["string"]), p.seed, prompts["string"][:5], out.prompts)
