"""The run's findings in words, from its metrics: results/<preset>/findings.md (rule write_findings)."""

from pathlib import Path

from tinylens.atomic import atomic_path
from tinylens.findings import findings_document
from tinylens.jobs import job

with job(snakemake) as j:
    text = findings_document(Path(j.output[0]).parent, j.params.preset)  # results/<preset>/findings.md
    with atomic_path(j.output[0]) as tmp:
        tmp.write_text(text, encoding="utf-8")
    j.log.info("%d families' findings -> %s", text.count("\n## "), j.output[0])
