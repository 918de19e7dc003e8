"""Gather every model's final losses into one metrics JSON (rule training_summary)."""

from tinylens.atomic import read_json, write_json
from tinylens.logs import log_to
from tinylens.train import summarize_training

with log_to(snakemake.log[0]) as log:
    metrics = [read_json(p) for p in snakemake.input.metrics]
    write_json(snakemake.output.summary, summarize_training(metrics, snakemake.params.original))
    log.info("wrote %s", snakemake.output.summary)
