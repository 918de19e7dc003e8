"""Every phase-change run's verdict, the controls against the reference run (rule phase_change_summary)."""

from tinylens.jobs import job
from tinylens.phase_change.detect import DetectSettings
from tinylens.phase_change.summary import load_run, summarize_run, summary

with job(snakemake) as j:
    inp, p = j.input, j.params
    settings = DetectSettings(**p.detect)
    runs = {}
    for name, curves_path, heads_path in zip(p.runs, inp.curves, inp.heads, strict=True):
        run = p.runs[name]
        curves, heads = load_run(curves_path, heads_path, run["context"])
        runs[name] = r = summarize_run(name, run, curves, heads, settings)
        j.log.info("%s: detected %s, window %.0f-%.0f (peak %d), best head L%d H%d prefix matching %.3f",
                   name, r["phase_change_detected"], r["window"]["start"], r["window"]["end"], r["window"]["peak"],
                   r["best_head"]["layer"], r["best_head"]["head"], r["best_head"]["final_prefix_matching"])
    j.write_json(j.output.summary, summary(runs, p.reference, settings))
