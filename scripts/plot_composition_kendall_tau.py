"""Figure: the symmetry test's Kendall-tau table (rule plot_composition_kendall_tau)."""

import json
from pathlib import Path

from tinylens.circuits.plots import plot_composition_kendall_tau
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    digest = json.loads(Path(snakemake.input.metrics).read_text())["symmetry"]
    plot_composition_kendall_tau(digest, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
