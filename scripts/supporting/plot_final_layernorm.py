"""Figure: the final LayerNorm under scaling and noise (rule plot_final_layernorm)."""

from tinylens.jobs import job
from tinylens.supporting.plots import make_final_layernorm
from tinylens.supporting.schemas import NOISE_SCHEMA, SCALING_SCHEMA
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_final_layernorm(read_columns(j.input.scaling, SCALING_SCHEMA),
                                       read_columns(j.input.noise, NOISE_SCHEMA)))
