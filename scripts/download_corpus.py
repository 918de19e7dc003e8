"""Fetch the corpus from config's corpus_url and verify its sha256 (rule download_corpus)."""

from tinylens.corpus import fetch_corpus
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    # corpus_url is read from the config, not params: see rules/corpus.smk.
    source = snakemake.config["corpus_url"]
    log.info("fetching the corpus from %s", source)
    fetch_corpus(source, snakemake.output.corpus, snakemake.params.sha256)
    log.info("wrote %s (sha256 %s verified)", snakemake.output.corpus, snakemake.params.sha256)
