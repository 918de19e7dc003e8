"""Every phase-change run's verdict over its seeds, the controls against the reference run, the rule's tests
against the controls, the sensitivity table, the dose and width curves (rule phase_change_summary)."""

from tinylens.jobs import job
from tinylens.phase_change.detect import DetectSettings
from tinylens.phase_change.summary import VerdictSettings, load_run, summarize

with job(snakemake) as j:
    inp, p = j.input, j.params
    tables = {}
    for name, curves, heads, composition in zip(p.runs, inp.curves, inp.heads, inp.composition, strict=True):
        tables[name] = (p.runs[name], *load_run(curves, heads, composition, p.runs[name]["context"]))
    document = summarize(tables, p.reference, DetectSettings(**p.detect), VerdictSettings(**p.verdict))
    for name, detected in document["detected"].items():
        j.log.info("%s: detected in %s seeds, peak tokens %s", name, detected, document["runs"][name]["peak_tokens"])
    j.write_json(j.output.summary, document)
