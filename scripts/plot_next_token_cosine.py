"""Figure: cosine of the residual stream with the next token's unembedding and embedding rows by depth (rule plot_next_token_cosine)."""

from tinylens.atomic import read_json
from tinylens.attention.plots import plot_next_token_cosine
from tinylens.attention.schemas import TRAJECTORY_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    vocab_size = read_json(snakemake.input.summary)["vocab_size"]
    plot_next_token_cosine(read_columns(snakemake.input.table, TRAJECTORY_SCHEMA), vocab_size, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
