"""Figure: ablation per block, both variants and contexts, the paper's table beside (rule plot_ablation)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.supporting.plots import plot_ablation

with log_to(snakemake.log[0]) as log:
    plot_ablation(json.loads(Path(snakemake.input.metrics).read_text())["ablation"], snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
