"""Every prompt mode's Hellinger summaries side by side in one metrics JSON (rule hellinger_summary)."""

from tinylens.approx import headline, side_by_side
from tinylens.atomic import read_json, write_json
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    per_mode = {m: read_json(p) for m, p in zip(snakemake.params.modes, snakemake.input.summaries, strict=True)}
    summary = side_by_side(per_mode)
    write_json(snakemake.output.summary, summary)
    write_json(snakemake.output.headline, headline(per_mode, read_json(snakemake.input.training)))
    log.info("%s -> %s, %s", summary["headline"], snakemake.output.summary, snakemake.output.headline)
