"""Figure: the final LayerNorm under scaling and noise (rule plot_final_layernorm)."""

from tinylens.logs import log_to
from tinylens.supporting.plots import plot_final_layernorm
from tinylens.supporting.schemas import NOISE_SCHEMA, SCALING_SCHEMA, table_columns
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    plot_final_layernorm(table_columns(read_table(snakemake.input.scaling, SCALING_SCHEMA)),
                         table_columns(read_table(snakemake.input.noise, NOISE_SCHEMA)), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
