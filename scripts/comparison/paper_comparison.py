"""Every published number beside ours: metrics JSON, CSV (for the report) and Markdown (rule paper_comparison)."""

from tinylens.atomic import atomic_path
from tinylens.comparison import ROWS, VERDICTS, compare, markdown, report, write_table_csv
from tinylens.jobs import job

with job(snakemake) as j:
    p, out = j.params, j.output
    documents = {name: j.read_json(path) for name, path in j.input.items()}
    table = compare(ROWS, documents, p.absent, p.files, p.differences)
    result = report(ROWS, table, p.preset, p.differences)
    j.write_json(out.metrics, result)
    write_table_csv(out.table, table)
    with atomic_path(out.markdown) as tmp:
        tmp.write_text(markdown(table), encoding="utf-8")
    j.log.info("%d rows: %s (%s not made here) -> %s, %s, %s", result["counts"]["rows"],
               ", ".join(f"{v} {result['counts'][v]}" for v in VERDICTS), sorted(p.absent) or "every source",
               out.metrics, out.table, out.markdown)
