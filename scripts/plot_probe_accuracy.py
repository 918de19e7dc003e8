"""Figure: speaker-probe accuracy by depth against chance (rule plot_probe_accuracy)."""

from tinylens.atomic import read_json
from tinylens.attention.plots import plot_probe_accuracy
from tinylens.attention.schemas import PROBE_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    speakers = read_json(snakemake.input.summary)["speakers"]
    plot_probe_accuracy(read_columns(snakemake.input.table, PROBE_SCHEMA), len(speakers), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
