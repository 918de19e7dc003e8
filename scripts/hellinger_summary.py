"""Both prompt modes' Hellinger summaries side by side in one metrics JSON (rule hellinger_summary)."""

import json
from pathlib import Path

from tinylens.approx import headline, side_by_side
from tinylens.atomic import write_json
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    per_mode = {m: json.loads(Path(p).read_text()) for m, p in zip(snakemake.params.modes, snakemake.input.summaries)}
    summary = side_by_side(per_mode)
    write_json(snakemake.output.summary, summary)
    write_json(snakemake.output.headline, headline(per_mode, json.loads(Path(snakemake.input.training).read_text())))
    log.info("%s -> %s, %s", summary["headline"], snakemake.output.summary, snakemake.output.headline)
