"""Figure: logit lens vs tuned lens by depth (rule plot_lens_curves)."""

import json
from pathlib import Path

from tinylens.attention.plots import plot_lens_curves
from tinylens.logs import log_to
from tinylens.model import ModelConfig

with log_to(snakemake.log[0]) as log:
    summary = json.loads(Path(snakemake.input.summary).read_text())
    vocab_size = ModelConfig.from_json(snakemake.input.model_config).vocab_size
    plot_lens_curves(summary["per_depth"], vocab_size, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
