"""Figure: losses of the pentagon and two-digon geometries and where they cross
(rule plot_superposition_loss_crossing)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.superposition.plots import plot_loss_crossing
from tinylens.superposition.schemas import NONUNIFORM_MODELS, read_columns

with log_to(snakemake.log[0]) as log:
    summary = json.loads(Path(snakemake.input.metrics).read_text())["phase_change"]
    crossing = summary["crossing_relative_density"]
    plot_loss_crossing(read_columns(snakemake.input.models, NONUNIFORM_MODELS),
                       crossing if isinstance(crossing, float) else None, summary["fixed_sparsity"],
                       snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
