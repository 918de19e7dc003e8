"""Figure: the original seed's loss at every context position x checkpoint, and its log-position
derivative (rule plot_dynamics_loss_by_position)."""

import json
from pathlib import Path

from tinylens.dynamics.figures import plot_loss_by_position
from tinylens.dynamics.summary import load_curves
from tinylens.logs import log_to
from tinylens.model import ModelConfig

with log_to(snakemake.log[0]) as log:
    inp, seed = snakemake.input, str(snakemake.params.original)
    cfg = ModelConfig.from_json(inp.model_config)
    summary = json.loads(Path(inp.summary).read_text())["seeds"][seed]
    curves = load_curves(inp.checkpoints, inp.heads, cfg.n_layer, cfg.n_head, cfg.block_size)
    plot_loss_by_position(curves, summary, seed, snakemake.params.smooth_decades, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
