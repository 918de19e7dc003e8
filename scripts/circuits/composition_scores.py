"""Composition scores of every head pair of one model, and over its checkpoints (rule composition_scores)."""

import sys
from pathlib import Path

from tqdm import tqdm

from tinylens.circuits.composition import score_table
from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.circuits.training import scores_over_training
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    model = load_model(Path(inp.weights).parent)
    step = j.read_json(inp.metrics)["steps"]
    write_table(out.scores, SCORES_SCHEMA, score_table(model, p.seed, step, p.samples, p.baseline_seed))
    j.log.info("wrote every pair's Q/K/V scores (both bases, LayerNorm ignored and folded) to %s", out.scores)
    cols = scores_over_training(Path(inp.weights).parent, p.seed, p.samples, p.baseline_seed,
                                progress=lambda items: tqdm(items, desc=f"seed {p.seed} checkpoints", file=sys.stderr))
    write_table(out.over_training, SCORES_SCHEMA, cols)
    steps = sorted(set(cols["step"]))
    j.log.info("wrote K-composition (LayerNorm ignored) at %d checkpoints (steps %s) to %s", len(steps), steps,
               out.over_training)
