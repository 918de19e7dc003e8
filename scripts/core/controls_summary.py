"""The controls of the core claim in one metrics file: each source's mean Hellinger distance from the model with
its paired test against the ffwd_out approximation, the values each was tuned to, and each block's share and each
block alone (rule controls_summary, method.md §6b)."""

from tinylens.core.controls import TABLES, controls_metrics, evaluation_prompts, mode_summary, read_controls
from tinylens.jobs import job

with job(snakemake) as j:
    p, inp = j.params, j.input
    controls = read_controls({name: inp[name] for name in TABLES})
    per_mode, blocks = {}, {}
    for mode, evaluation, summary in zip(p.modes, inp.evaluations, inp.summaries):
        columns = evaluation_prompts(evaluation, p.alternates, p.n_blocks)
        per_mode[mode] = mode_summary(columns, controls[mode], p.alternates)
        blocks[mode] = j.read_json(summary)["blocks"]
    tuned = {name: j.read_json(inp[f"{name}_tuned"]) for name in TABLES}
    metrics = controls_metrics(per_mode, tuned, blocks)
    j.write_json(j.output.metrics, metrics)
    for mode, m in metrics["modes"].items():
        j.log.info("%s: %s", mode, {k: (s["mean"], s.get("verdict")) for k, s in m["sources"].items()})
