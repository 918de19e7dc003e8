"""Figure: speaker-probe accuracy by depth against chance (rule plot_probe_accuracy)."""

import json
from pathlib import Path

from tinylens.attention.plots import plot_probe_accuracy
from tinylens.attention.probes import PROBE_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    speakers = json.loads(Path(snakemake.input.summary).read_text())["speakers"]
    plot_probe_accuracy(read_columns(snakemake.input.table, PROBE_SCHEMA), len(speakers), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
