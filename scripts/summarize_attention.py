"""Gather the attention-dynamics headline numbers into metrics/attention.json (rule attention_summary)."""

from tinylens.atomic import read_json, write_json
from tinylens.attention.schemas import HEAD_SCHEMA
from tinylens.attention.summary import family_metrics, summarize_heads
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    inp = snakemake.input
    metrics = family_metrics(snakemake.params.seed, summarize_heads(read_columns(inp.heads, HEAD_SCHEMA)),
                             read_json(inp.trajectories), read_json(inp.probes))
    write_json(snakemake.output.summary, metrics)
    log.info("wrote %s", snakemake.output.summary)
