"""An external model's findings in words, from its metrics: results/<preset>/external/<model>/findings.md
(rule external_findings)."""

from pathlib import Path

from tinylens.atomic import atomic_path
from tinylens.findings import external_findings_document
from tinylens.jobs import job

with job(snakemake) as j:
    root = Path(j.output.findings).parent  # results/<preset>/external/<model>/
    text = external_findings_document(root, j.params.preset, j.wildcards.name, j.params.model)
    with atomic_path(j.output.findings) as tmp:
        tmp.write_text(text, encoding="utf-8")
    j.log.info("%d sections -> %s", text.count("\n## "), j.output.findings)
