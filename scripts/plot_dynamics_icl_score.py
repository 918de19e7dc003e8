"""Figure: in-context learning score and validation loss of every seed against step (rule plot_dynamics_icl_score)."""

import json
from pathlib import Path

from tinylens.dynamics.figures import plot_icl_score
from tinylens.dynamics.summary import load_curves
from tinylens.logs import log_to
from tinylens.model import ModelConfig

with log_to(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    cfg = ModelConfig.from_json(inp.model_config)
    summary = json.loads(Path(inp.summary).read_text())["seeds"]
    curves = {str(seed): load_curves(c, h, cfg.n_layer, cfg.n_head, cfg.block_size)
              for seed, c, h in zip(p.seeds, inp.checkpoints, inp.heads, strict=True)}
    plot_icl_score(curves, summary, p.icl_positions, str(p.original), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
