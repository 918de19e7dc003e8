"""Figure: cosine of the residual stream with the next token's unembedding and embedding rows by depth (rule plot_next_token_cosine)."""

from tinylens.attention.plots import make_next_token_cosine
from tinylens.attention.schemas import TRAJECTORY_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    vocab_size = j.read_json(j.input.summary)["vocab_size"]
    j.save_figure(make_next_token_cosine(read_columns(j.input.table, TRAJECTORY_SCHEMA), vocab_size))
