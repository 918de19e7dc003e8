"""The run's headline, what `dvc metrics show` prints: results/headline/<preset>.json (rule write_headline)."""

from tinylens.comparison import run_headline
from tinylens.jobs import job

with job(snakemake) as j:
    headline = run_headline(j.read_json(j.input.core), j.read_json(j.input.comparison))
    j.write_json(j.output[0], headline)
    j.log.info("%s -> %s", headline, j.output[0])
