"""Figure: absorption of the backward attention walk at position 0, per head (rule plot_attention_absorption)."""

from tinylens.attention.plots import make_attention_absorption
from tinylens.attention.schemas import ABSORPTION_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_attention_absorption(read_columns(j.input.table, ABSORPTION_SCHEMA)))
