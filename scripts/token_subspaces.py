"""Learn every token's vectors at each configured stage, their SVD, the self and mixture checks
(rule token_subspaces; one stage after the other)."""

from pathlib import Path

import numpy as np
import torch

from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.supporting.inputs import save_subspaces
from tinylens.supporting.schemas import mixtures_schema, tokens_schema
from tinylens.supporting.subspaces import learn_token_vectors, mixture_distributions, self_probability, token_subspaces
from tinylens.supporting.summary import summarize_stage
from tinylens.tables import write_table
from tinylens.train import select_device
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    inp, out, p = snakemake.input, snakemake.output, snakemake.params
    torch.set_num_threads(snakemake.threads)
    device = select_device(p.device)
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    unknown = [c for pair in p.pairs for c in pair if c not in tokenizer.vocab]
    if unknown:
        raise ValueError(f"config key 'supporting.mixture_pairs' names characters {unknown} that are not in the "
                         f"vocabulary of {inp.tokenizer}; use single characters of the corpus")
    tokens = list(range(tokenizer.vocab_size))
    pairs = [(tokenizer.vocab.index(a), tokenizer.vocab.index(b)) for a, b in p.pairs]
    for i, stage in enumerate(p.stages):
        log.info("stage %d: learning %d samples for each of %d tokens, at most %d steps, lr %g", stage, p.samples,
                 len(tokens), p.steps, p.lr)
        learned = learn_token_vectors(model.to(device), stage, tokens, p.samples, lr=p.lr,
                                      weight_decay=p.weight_decay, target_nll=p.target_nll, max_steps=p.steps,
                                      seed=p.seed, progress=True)
        model = model.cpu()
        sub = token_subspaces(learned.samples.cpu())
        p_self = self_probability(model, stage, tokens, sub)
        save_subspaces(out.vectors[i], stage, tokenizer.vocab, {
            "samples": learned.samples.cpu(), "direction": sub.direction, "median_norm": sub.median_norm,
            "singular": sub.singular, "singular_centred": sub.singular_centred})
        columns = {
            "stage": np.full(len(tokens), stage, dtype=np.int8),
            "token_id": np.asarray(tokens, dtype=np.int16),
            "token": list(tokenizer.vocab),
            "reached": learned.stopped_step >= 0,
            "stopped_step": learned.stopped_step.astype(np.int32),
            "joint_nll": learned.joint_nll,
            "samples_reached": (learned.sample_nll < p.target_nll).sum(1).astype(np.int32),
            "singular": sub.singular,
            "singular_centred": sub.singular_centred,
            "sigma_ratio": sub.sigma_ratio,
            "sigma_ratio_centred": sub.sigma_ratio_centred,
            "median_norm": sub.median_norm,
            "negative_share": sub.negative_share,
            "self_probability": p_self,
        }
        write_table(out.tokens[i], tokens_schema(sub.singular.shape[1]), columns)
        summary = summarize_stage(columns, p.target_nll, p.samples)
        log.info("stage %d: %d of %d tokens reached the target (%d samples); sigma_1/sigma_2 median %s; "
                 "p(token | direction) median %s", stage, summary["tokens_reached"], summary["tokens"],
                 summary["samples_reached"], summary["sigma_ratio"]["median"], summary["self_probability"]["median"])
        write_table(out.mixtures[i], mixtures_schema(tokenizer.vocab_size), {
            "stage": np.full(len(pairs), stage, dtype=np.int8), "token_a": [a for a, _ in p.pairs],
            "token_b": [b for _, b in p.pairs], "distribution": mixture_distributions(model, stage, sub, pairs)})
        log.info("wrote %s, %s and %s", out.vectors[i], out.tokens[i], out.mixtures[i])
