"""Fetch the corpus from config's corpus_url and verify its sha256 (rule download_corpus)."""

from tinylens.core.corpus import fetch_corpus
from tinylens.jobs import job

with job(snakemake) as j:
    # corpus_url is read from the config, not params: see rules/corpus.smk.
    source = snakemake.config["corpus_url"]
    j.log.info("fetching the corpus from %s", source)
    fetch_corpus(source, j.output.corpus, j.params.sha256)
    j.log.info("wrote %s (sha256 %s verified)", j.output.corpus, j.params.sha256)
