"""Figure: the original seed's per-head prefix-matching and copying scores against step (rule plot_dynamics_head_scores)."""

import json
from pathlib import Path

from tinylens.dynamics.figures import plot_head_scores
from tinylens.dynamics.summary import load_curves
from tinylens.logs import log_to
from tinylens.model import ModelConfig

with log_to(snakemake.log[0]) as log:
    inp, seed = snakemake.input, str(snakemake.params.original)
    cfg = ModelConfig.from_json(inp.model_config)
    summary = json.loads(Path(inp.summary).read_text())
    curves = load_curves(inp.checkpoints, inp.heads, cfg.n_layer, cfg.n_head, cfg.block_size)
    plot_head_scores(curves, summary["seeds"][seed], seed, summary["headline"]["prefix_matching_uniform_baseline"],
                     snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
