"""Figure: interaction energy, KL to the unigram and the unigram direction against step (rule plot_dynamics_energy_kl)."""

import json
from pathlib import Path

from tinylens.dynamics.figures import plot_energy_kl
from tinylens.dynamics.summary import load_curves
from tinylens.logs import log_to
from tinylens.model import ModelConfig

with log_to(snakemake.log[0]) as log:
    inp = snakemake.input
    cfg = ModelConfig.from_json(inp.model_config)
    summary = json.loads(Path(inp.summary).read_text())["seeds"]
    curves = {str(seed): load_curves(c, h, cfg.n_layer, cfg.n_head, cfg.block_size)
              for seed, c, h in zip(snakemake.params.seeds, inp.checkpoints, inp.heads, strict=True)}
    plot_energy_kl(curves, summary, cfg.n_layer, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
