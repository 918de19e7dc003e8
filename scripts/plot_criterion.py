"""Figure: the criterion per block, both subspace variants, chance both ways, the paper's rates (rule plot_criterion)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.supporting.plots import plot_criterion

with log_to(snakemake.log[0]) as log:
    plot_criterion(json.loads(Path(snakemake.input.metrics).read_text())["criterion"], snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
