"""Figure: absorption of the backward attention walk at position 0, per head (rule plot_attention_absorption)."""

from tinylens.attention.plots import plot_attention_absorption
from tinylens.attention.schemas import ABSORPTION_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    plot_attention_absorption(read_columns(snakemake.input.table, ABSORPTION_SCHEMA), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
