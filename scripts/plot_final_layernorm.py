"""Figure: the final LayerNorm under scaling and noise (rule plot_final_layernorm)."""

from tinylens.jobs import job
from tinylens.supporting.plots import plot_final_layernorm
from tinylens.supporting.schemas import NOISE_SCHEMA, SCALING_SCHEMA, table_columns
from tinylens.tables import read_table

with job(snakemake) as j:
    plot_final_layernorm(table_columns(read_table(j.input.scaling, SCALING_SCHEMA)),
                         table_columns(read_table(j.input.noise, NOISE_SCHEMA)), j.output.figure)
    j.log.info("wrote %s", j.output.figure)
