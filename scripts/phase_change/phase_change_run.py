"""Train one phase-change run, measuring every checkpoint on the fixed probes (rule phase_change_run)."""

from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.jobs import job
from tinylens.phase_change.data import ProbeSettings, make_probes
from tinylens.phase_change.run import RunSettings, train_run
from tinylens.phase_change.schemas import (
    CURVE_COLUMNS,
    FINAL_COLUMNS,
    HEADS_SCHEMA,
    POSITION_COLUMNS,
    curves_schema,
    rows_to_columns,
)
from tinylens.tables import write_table

with job(snakemake) as j:
    inp, out, p = j.input, j.output, j.params
    settings, probe_settings = RunSettings(**p.run), ProbeSettings(**p.probes)
    train_ids = load_ids(inp.train)
    vocab = CharTokenizer.load(inp.tokenizer).vocab_size
    probes = make_probes(train_ids, load_ids(inp.val), vocab, settings.context, settings.mixture, probe_settings)
    j.log.info("run %s: %s; data: %s", j.wildcards.run, settings, settings.mixture.label)
    curves, heads = train_run(train_ids, vocab, probes, probe_settings, settings)
    schema = curves_schema(settings.context)
    write_table(out.curves, schema, rows_to_columns(curves, ("step", *CURVE_COLUMNS, *FINAL_COLUMNS, *POSITION_COLUMNS)))
    write_table(out.heads, HEADS_SCHEMA, rows_to_columns(heads, HEADS_SCHEMA.columns))
    j.log.info("run %s: %d checkpoints, %.1f CPU seconds -> %s", j.wildcards.run, len(curves),
               curves[-1]["cpu_seconds"], out.curves)
