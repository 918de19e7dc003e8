"""Measure every checkpoint of one seed on the fixed probes (rule dynamics_measure)."""

from pathlib import Path

from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.dynamics.measure import measure_model
from tinylens.dynamics.probes import MeasureSettings, make_probes
from tinylens.dynamics.schemas import HEADS_SCHEMA, checkpoint_schema
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import write_table

with job(snakemake) as j:
    inp, out, p = j.input, j.output, j.params
    cfg = load_config(inp.config)
    settings = MeasureSettings(**p.measure)
    probes = make_probes(load_ids(inp.train), load_ids(inp.val), CharTokenizer.load(inp.tokenizer).vocab_size,
                         cfg.block_size, settings)
    j.log.info("probes: %d validation and %d train windows of %d tokens, %d repeated sequences of %d x %d tokens",
               len(probes.val), len(probes.train), cfg.block_size, len(probes.repeated), settings.repeat.copies,
               settings.repeat.length)
    checkpoints, heads = measure_model(Path(inp.config).parent, probes, settings,
                                       tokens_per_step=p.batch_size * cfg.block_size, device=j.device)
    write_table(out.checkpoints, checkpoint_schema(cfg.n_layer, cfg.block_size), checkpoints)
    write_table(out.heads, HEADS_SCHEMA, heads)
    j.log.info("seed %s: %d checkpoints -> %s, %s", j.wildcards.seed, len(checkpoints["step"]),
               out.checkpoints, out.heads)
