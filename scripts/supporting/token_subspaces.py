"""Learn every token's vectors at each configured stage, their SVD, the self and mixture checks
(rule token_subspaces; one stage after the other)."""

from pathlib import Path

import numpy as np

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.inputs import save_subspaces
from tinylens.supporting.schemas import mixtures_schema, tokens_schema
from tinylens.supporting.subspaces import analyse_stage, mixture_pairs
from tinylens.supporting.summary import summarize_stage
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    inp, out, p = j.input, j.output, j.params
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    pairs = mixture_pairs(p.pairs, tokenizer.vocab, inp.tokenizer)
    for i, stage in enumerate(p.stages):
        j.log.info("stage %d: learning %d samples for each of %d tokens, at most %d steps, lr %g", stage, p.samples,
                   tokenizer.vocab_size, p.steps, p.lr)
        result = analyse_stage(model, stage, tokenizer.vocab, pairs, p.samples, lr=p.lr, weight_decay=p.weight_decay,
                               target_nll=p.target_nll, max_steps=p.steps, seed=p.seed,
                               plateau_window=p.plateau["window"], plateau_min_drop=p.plateau["min_drop"],
                               device=j.device, progress=True)
        save_subspaces(out.vectors[i], stage, tokenizer.vocab, result.tensors)
        write_table(out.tokens[i], tokens_schema(result.columns["singular"].shape[1]), result.columns)
        summary = summarize_stage(result.columns, p.target_nll, p.samples)
        j.log.info("stage %d: %d of %d tokens reached the target (%d samples), %d converged; sigma_1/sigma_2 median "
                   "%s; p(token | direction) median %s", stage, summary["tokens_reached"], summary["tokens"],
                   summary["samples_reached"], summary["tokens_converged"], summary["sigma_ratio"]["median"],
                   summary["self_probability"]["median"])
        write_table(out.mixtures[i], mixtures_schema(tokenizer.vocab_size), {
            "stage": np.full(len(pairs), stage, dtype=np.int8), "token_a": [a for a, _ in p.pairs],
            "token_b": [b for _, b in p.pairs], "distribution": result.mixtures})
        j.log.info("wrote %s, %s and %s", out.vectors[i], out.tokens[i], out.mixtures[i])
