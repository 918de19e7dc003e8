"""Per-prompt Hellinger distances and their summary, for one prompt mode (rule evaluate)."""

import json
from pathlib import Path

import numpy as np

from tinylens.activations import load_logits
from tinylens.approx import describe, evaluate, grid_index, hellinger_schema, softmax, split_masks
from tinylens.atomic import write_json
from tinylens.logs import log_to
from tinylens.model import ModelConfig
from tinylens.search import cumulative, load_summary, threshold_edges
from tinylens.strings import load_prompts
from tinylens.tables import write_table

with log_to(snakemake.log[0]) as log:
    p, inp, out = snakemake.params, snakemake.input, snakemake.output
    cfg = ModelConfig.from_json(inp.model_config)
    edges = threshold_edges(**p.grid)
    _, matches, counts = load_summary(inp.shards, cfg.n_layer, len(edges), cfg.vocab_size)
    prompts = load_prompts(inp.prompts)
    tuned = json.loads(Path(inp.tuned).read_text())
    logits = {seed: load_logits(Path(path).parent, cfg.vocab_size) for seed, path in zip(p.seeds, inp.logits)}
    q = softmax(logits[p.original])
    paper = None
    if "paper_values" in tuned:
        paper = (grid_index(tuned["paper_values"]["thresholds"], edges), np.asarray(tuned["paper_values"]["weights"]))
    columns = evaluate(
        cumulative(counts, axis=2, out=counts), cumulative(matches, axis=2, out=matches), q,
        {s: softmax(logits[s]) for s in p.seeds if s != p.original},
        (grid_index(tuned["thresholds"], edges), np.asarray(tuned["weights"])), paper)
    alternates = [s for s in p.seeds if s != p.original]
    write_table(out.table, hellinger_schema(alternates, cfg.n_layer), {**prompts, **columns})
    log.info("wrote per-prompt distances of %d prompts to %s", len(q), out.table)

    on_eval = split_masks(prompts["split"])["eval"]
    summary = {
        "mode": p.mode,
        "split": "eval",
        "approximation": describe(columns["hellinger_approx"][on_eval]),
        "alternates": {str(s): describe(columns[f"hellinger_seed{s}"][on_eval]) for s in alternates},
        "no_match_prompts": int(columns["no_match"][on_eval].sum()),
        "thresholds": tuned["thresholds"],
        "weights": tuned["weights"],
    }
    if paper is not None:
        summary["paper_values"] = describe(columns["hellinger_paper_values"][on_eval])
    write_json(out.summary, summary)
    log.info("%s mode: approximation mean H %.4f, alternates %s -> %s", p.mode, summary["approximation"]["mean"],
             {s: v["mean"] for s, v in summary["alternates"].items()}, out.summary)
