"""Every prompt mode's Hellinger summaries side by side in one metrics JSON (rule hellinger_summary)."""

from tinylens.core.summary import headline, side_by_side
from tinylens.jobs import job

with job(snakemake) as j:
    per_mode = {m: j.read_json(p) for m, p in zip(j.params.modes, j.input.summaries, strict=True)}
    summary = side_by_side(per_mode)
    j.write_json(j.output.summary, summary)
    j.write_json(j.output.headline, headline(per_mode, j.read_json(j.input.training)))
    j.log.info("%s -> %s, %s", summary["headline"], j.output.summary, j.output.headline)
