"""Gather the attention-dynamics headline numbers into metrics/attention.json (rule attention_summary)."""

import json
from pathlib import Path

from tinylens.atomic import write_json
from tinylens.attention.spectra import HEAD_SCHEMA
from tinylens.attention.summary import family_metrics, summarize_heads
from tinylens.logs import log_to
from tinylens.tables import read_columns

with log_to(snakemake.log[0]) as log:
    inp = snakemake.input
    metrics = family_metrics(snakemake.params.seed, summarize_heads(read_columns(inp.heads, HEAD_SCHEMA)),
                             json.loads(Path(inp.trajectories).read_text()), json.loads(Path(inp.probes).read_text()))
    write_json(snakemake.output.summary, metrics)
    log.info("wrote %s", snakemake.output.summary)
