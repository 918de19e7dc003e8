"""Gather every model's final losses into one metrics JSON (rule training_summary)."""

from tinylens.core.training_log import summarize_training
from tinylens.jobs import job

with job(snakemake) as j:
    metrics = [j.read_json(p) for p in j.input.metrics]
    j.write_json(j.output.summary, summarize_training(metrics, j.params.original))
