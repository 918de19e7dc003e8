"""Every checkpoint of one external model measured as our seeds are, with its weights' digest and §8b's
per-period probes (rule external_measure)."""

from tinylens.circuits.schemas import SCORES_SCHEMA
from tinylens.dynamics.probes import MeasureSettings
from tinylens.dynamics.schemas import HEADS_SCHEMA, checkpoint_schema
from tinylens.external import measure_checkpoints
from tinylens.jobs import job
from tinylens.phase_change.onset import ONSET_HEADS_SCHEMA, ONSET_SCHEMA, OnsetSettings
from tinylens.tables import write_table
from tinylens.weights import save_config

with job(snakemake) as j:
    p, out = j.params, j.output
    text = open(j.input.corpus, encoding="utf-8").read()[: p.corpus_chars]
    j.log.info("%s: %d checkpoints (%s), %d characters of the corpus%s", p.model, len(p.steps), p.revision, len(text),
               f"; fetched, measured and dropped one at a time in {p.scratch}" if p.stream else "")
    onset = {k: v for k, v in p.onset.items() if k != "detect"}
    m = measure_checkpoints(p.model, p.steps, p.revision, text, p.train_fraction, p.context, p.tokens_per_step,
                            MeasureSettings(**p.measure), p.samples, p.baseline_seed, device=j.device,
                            onset=OnsetSettings(**onset), stream=p.scratch if p.stream else None)
    cfg = m["config"]
    save_config(out.config, cfg)
    write_table(out.checkpoints, checkpoint_schema(cfg.n_layer, cfg.block_size), m["checkpoints"])
    write_table(out.heads, HEADS_SCHEMA, m["heads"])
    write_table(out.onset, ONSET_SCHEMA, m["onset"])
    write_table(out.onset_heads, ONSET_HEADS_SCHEMA, m["onset_heads"])
    write_table(out.over_training, SCORES_SCHEMA, m["over_training"])
    write_table(out.scores, SCORES_SCHEMA, m["scores"])
    j.wrote(out.config, out.checkpoints, out.heads, out.onset, out.onset_heads, out.over_training, out.scores)
