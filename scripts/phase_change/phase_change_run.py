"""Train every seed of one phase-change run, measuring every checkpoint on the fixed probes (rule phase_change_run)."""

from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.jobs import job
from tinylens.phase_change.data import ProbeSettings, make_probes
from tinylens.phase_change.run import RunSettings, train_run
from tinylens.phase_change.schemas import (
    COMPOSITION_SCHEMA,
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
    run = {k: v for k, v in p.run.items() if k != "seeds"}
    probe_settings = ProbeSettings(**p.probes)
    train_ids, val_ids = load_ids(inp.train), load_ids(inp.val)
    vocab = CharTokenizer.load(inp.tokenizer).vocab_size
    curves, heads, composition = [], [], []
    for seed in p.run["seeds"]:
        settings = RunSettings(**run, seed=seed)
        probes = make_probes(train_ids, val_ids, vocab, settings.context, settings.mixture, probe_settings)
        j.log.info("run %s, seed %d: %s; data: %s", j.wildcards.run, seed, settings, settings.mixture.label)
        rows = train_run(train_ids, vocab, probes, probe_settings, settings)
        for table, new in zip((curves, heads, composition), rows):
            table += new
        j.log.info("run %s, seed %d: %d checkpoints, %.1f CPU seconds", j.wildcards.run, seed, len(rows[0]),
                   rows[0][-1]["cpu_seconds"])
    columns = ("seed", "step", *CURVE_COLUMNS, *FINAL_COLUMNS, *POSITION_COLUMNS)
    write_table(out.curves, curves_schema(settings.context), rows_to_columns(curves, columns))
    write_table(out.heads, HEADS_SCHEMA, rows_to_columns(heads, HEADS_SCHEMA.columns))
    write_table(out.composition, COMPOSITION_SCHEMA, rows_to_columns(composition, COMPOSITION_SCHEMA.columns))
    j.wrote(out.curves, out.heads, out.composition)
