"""Headline numbers of the superposition family, the source's findings beside ours (rule superposition_summary)."""

from tinylens.atomic import write_json
from tinylens.logs import log_to
from tinylens.superposition.experiments import summarize_tables
from tinylens.superposition.schemas import TABLES, read_columns

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    tables = {name: read_columns(path, TABLES[name]) for name, path in snakemake.input.items()}
    metrics = summarize_tables(tables, p.spec, p.definitions)
    write_json(snakemake.output.metrics, {"preset": p.preset, **metrics})
    log.info("headline: %s; wrote %s", metrics["headline"], snakemake.output.metrics)
