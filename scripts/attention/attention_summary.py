"""Gather the attention-dynamics headline numbers into metrics/attention.json (rule attention_summary)."""

from tinylens.attention.schemas import HEAD_SCHEMA, HULL_SCHEMA
from tinylens.attention.summary import family_metrics, summarize_heads, summarize_hull
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    inp = j.input
    metrics = family_metrics(j.params.seed, summarize_heads(read_columns(inp.heads, HEAD_SCHEMA)),
                             j.read_json(inp.trajectories), j.read_json(inp.probes),
                             summarize_hull(read_columns(inp.hull, HULL_SCHEMA)),
                             j.read_json(inp.alignment) if inp.get("alignment") else None)  # the tied variant's
    j.write_json(j.output.summary, metrics)
