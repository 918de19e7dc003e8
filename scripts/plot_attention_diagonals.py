"""Figure: each head's self-attention weights, the eigenvalues of its causal attention matrix (rule plot_attention_diagonals)."""

from tinylens.attention.plots import plot_attention_diagonals
from tinylens.attention.schemas import DIAGONAL_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    plot_attention_diagonals(read_columns(snakemake.input.table, DIAGONAL_SCHEMA), snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
