"""One external model's metrics/dynamics.json: the integrity report of its checkpoints, and our seeds' phases,
window and best head with §8b's induction-head onset on those whose weights are distinct (rule
external_dynamics_summary)."""

import sys

from tinylens.dynamics.summary import PhaseSettings, load_curves, summarize
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.phase_change.detect import DetectSettings
from tinylens.phase_change.onset import ONSET_HEADS_SCHEMA, ONSET_SCHEMA, suite_summary
from tinylens.tables import read_columns

with job(snakemake) as j:
    inp, p, name = j.input, j.params, j.wildcards.name
    cfg = load_config(inp.config)
    phases = PhaseSettings(**p.phases)
    curves = load_curves(inp.checkpoints, inp.heads, cfg.n_layer, cfg.n_head, cfg.block_size)
    seed, warning = suite_summary(
        curves, read_columns(inp.onset, ONSET_SCHEMA), read_columns(inp.onset_heads, ONSET_HEADS_SCHEMA), cfg.n_layer,
        p.tokens_per_step, phases, DetectSettings(**p.onset["detect"], min_swing=phases.min_swing), p.keep_duplicates,
        f"external model {name} ({p.model})")
    if warning:
        j.log.warning(warning)
        print(f"tinylens: warning: {warning}", file=sys.__stderr__)  # on the console, not only in the log
    onset, w = seed["onset"], seed["onset"]["window"]
    j.log.info("%d of %d checkpoints used; induction-head onset (§8b) %s: window steps %.0f-%.0f (peak %d, %d tokens), "
               "tests %s, best head layer %d head %d", onset["checkpoints"], seed["integrity"]["checkpoints"],
               "detected" if onset["phase_change_detected"] else "not detected", w["start"], w["end"], w["peak"],
               w["peak_tokens"], {k: t["pass"] for k, t in onset["tests"].items()}, onset["best_head"]["layer"],
               onset["best_head"]["head"])
    document = summarize({p.seed: seed}, p.seed, phases, p.repeat_length, p.repeat_copies)
    document["external"] = {"name": name, "model": p.model, "revision": p.revision, "steps": list(p.steps),
                            "tokens_per_step": p.tokens_per_step, "onset_settings": p.onset}
    j.write_json(j.output.summary, document)
