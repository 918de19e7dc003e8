"""Headline numbers of the superposition family, the source's findings beside ours (rule superposition_summary)."""

from tinylens.jobs import job
from tinylens.superposition.schemas import TABLES
from tinylens.superposition.summary import SummarySettings, summarize_tables
from tinylens.tables import read_columns

with job(snakemake) as j:
    p = j.params
    tables = {name: read_columns(path, TABLES[name]) for name, path in j.input.items()}
    metrics = summarize_tables(tables, SummarySettings(**p.settings))
    j.write_json(j.output.metrics, {"preset": p.preset, **metrics})
    j.log.info("headline: %s; wrote %s", metrics["headline"], j.output.metrics)
