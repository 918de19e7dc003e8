"""Tune per-block thresholds and weights on the tuning prompts (rule tune_approximation)."""

from pathlib import Path

from tinylens.core.activations import load_logits
from tinylens.core.approx import save_sweep, softmax, summary_for_prompts, tuning_report
from tinylens.core.search import cumulative, threshold_edges
from tinylens.core.strings import load_prompts
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    cfg = load_config(inp.config)
    edges = threshold_edges(**p.grid)
    prompts = load_prompts(inp.prompts)
    _, counts = summary_for_prompts(inp.shards, prompts["prompt_id"], cfg.n_layer, len(edges), cfg.vocab_size)
    q = softmax(load_logits(Path(inp.logits).parent, cfg.vocab_size, strings=prompts["string"]))
    above = cumulative(counts, axis=2, out=counts)  # in place: no second copy of the counts
    result, sweep = tuning_report(above, q, prompts["split"], edges, p.paper, p.rounds, p.mode)
    j.write_json(out.tuned, result)
    j.log.info("%s mode: thresholds %s, weights %s, mean H tune %.4f / eval %.4f -> %s", p.mode,
               result["thresholds"], result["weights"], *result["mean_hellinger"].values(), out.tuned)
    save_sweep(out.sweep, sweep)
    j.log.info("wrote the single-block threshold sweep to %s", out.sweep)
