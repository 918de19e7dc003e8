"""The permuted null: the ffwd_out approximation from the search's second count matrix, the strings' next-token
counts permuted among the strings, tuned and evaluated as the approximation is; it must fail (rule
null_approximation, method.md §6b)."""

from pathlib import Path

from tinylens.core.activations import load_logits
from tinylens.core.approx import initial_thresholds, softmax, summary_for_prompts, tune_and_evaluate
from tinylens.core.controls import evaluate_sources
from tinylens.core.schemas import controls_schema
from tinylens.core.search import cumulative, threshold_edges
from tinylens.core.strings import load_prompts
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import write_table

with job(snakemake) as j:
    p, inp = j.params, j.input
    cfg = load_config(inp.config)
    edges = threshold_edges(**p.grid)
    init = initial_thresholds(p.paper, edges, cfg.n_layer)

    def load(mode):
        prompts = load_prompts(inp[f"prompts_{mode}"])
        _, counts = summary_for_prompts(inp[f"null_{mode}"], prompts["prompt_id"], cfg.n_layer, len(edges),
                                        cfg.vocab_size)
        q = softmax(load_logits(Path(inp[f"logits_{mode}"]).parent, cfg.vocab_size, strings=prompts["string"]))
        return prompts, {"above": cumulative(counts, axis=2, out=counts), "q": q}

    def fit(mode, arrays, splits):
        return {"null": tune_and_evaluate(arrays["above"], arrays["q"], splits, init, p.rounds)}

    tuned, columns = evaluate_sources(p.modes, p.tuned_with, load, fit)
    write_table(j.output.table, controls_schema(["null"]), columns)
    j.write_json(j.output.tuned, {**tuned, "null_seed": p.null_seed})
