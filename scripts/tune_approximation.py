"""Tune per-block thresholds and weights on the tuning prompts (rule tune_approximation)."""

import csv
import io
from pathlib import Path

import numpy as np
import torch

from tinylens.activations import load_logits
from tinylens.approx import approximate, grid_index, hellinger, single_block_sweep, softmax, split_masks, tune
from tinylens.atomic import write_json, write_text
from tinylens.logs import log_to
from tinylens.model import ModelConfig
from tinylens.search import cumulative, load_summary, threshold_edges
from tinylens.strings import load_prompts

with log_to(snakemake.log[0]) as log:
    p, inp, out = snakemake.params, snakemake.input, snakemake.output
    torch.set_num_threads(snakemake.threads)  # the weight fit is tiny: more threads only add overhead
    cfg = ModelConfig.from_json(inp.model_config)
    edges = threshold_edges(**p.grid)
    ids, _, counts = load_summary(inp.shards, cfg.n_layer, len(edges), cfg.vocab_size)
    prompts = load_prompts(inp.prompts)
    if not np.array_equal(ids, prompts["prompt_id"]):
        raise ValueError(f"search shards {inp.shards} do not cover the prompts of {inp.prompts}; rerun the search")
    above = cumulative(counts, axis=2, out=counts)  # in place: no second copy of the counts
    q = softmax(load_logits(Path(inp.logits).parent, cfg.vocab_size))
    masks = split_masks(prompts["split"])
    has_paper = len(p.paper["thresholds"]) == cfg.n_layer
    paper = (grid_index(p.paper["thresholds"], edges), np.asarray(p.paper["weights"])) if has_paper else None
    init = paper[0] if has_paper else np.full(cfg.n_layer, len(edges) // 2)
    tuned = tune(above[masks["tune"]], q[masks["tune"]], init, rounds=p.rounds)

    def mean_h(split, th, w):
        return round(float(hellinger(approximate(above[masks[split]], th, w)[0], q[masks[split]]).mean()), 6)

    result = {
        "mode": p.mode,
        "thresholds": [round(float(edges[k]), 4) for k in tuned.thresholds],
        "weights": [round(float(w), 6) for w in tuned.weights],
        "mean_hellinger": {s: mean_h(s, tuned.thresholds, tuned.weights) for s in ("tune", "eval")},
        "n_prompts": {s: int(m.sum()) for s, m in masks.items()},
    }
    if has_paper:
        result["paper_values"] = {
            "thresholds": p.paper["thresholds"], "weights": p.paper["weights"],
            "mean_hellinger": {s: mean_h(s, *paper) for s in ("tune", "eval")},
        }
    write_json(out.tuned, result)
    log.info("%s mode: thresholds %s, weights %s, mean H tune %.4f / eval %.4f -> %s", p.mode,
             result["thresholds"], result["weights"], *result["mean_hellinger"].values(), out.tuned)

    sweep = single_block_sweep(above[masks["tune"]], q[masks["tune"]])  # [blocks thresholds]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["block", "threshold", "mean_hellinger"])
    writer.writerows([b, round(float(edges[k]), 4), round(float(sweep[b, k]), 6)]
                     for b in range(cfg.n_layer) for k in range(len(edges)))
    write_text(out.sweep, buf.getvalue())
    log.info("wrote the single-block threshold sweep to %s", out.sweep)
