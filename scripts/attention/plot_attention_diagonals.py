"""Figure: each head's self-attention weights, the eigenvalues of its causal attention matrix (rule plot_attention_diagonals)."""

from tinylens.attention.plots import make_attention_diagonals
from tinylens.attention.schemas import DIAGONAL_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_attention_diagonals(read_columns(j.input.table, DIAGONAL_SCHEMA)))
