"""The symmetry test on the original model (rule symmetry_test)."""

from pathlib import Path

from tinylens.circuits.schemas import SYMMETRY_SCHEMA
from tinylens.circuits.symmetry import make_transforms, symmetry_test, token_windows
from tinylens.core.corpus import load_ids
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    model = load_model(Path(inp.weights).parent)
    tokens = token_windows(load_ids(inp.val), p.sequences, model.config.block_size)
    transforms = make_transforms(model.config.d_model, p.transform_seed, tuple(p.conditions))
    cols, summary = symmetry_test(model, transforms, tokens, log=j.log)
    write_table(out.table, SYMMETRY_SCHEMA, cols)
    j.write_json(out.summary, {"seed": p.seed, "tokens": {"sequences": int(tokens.shape[0]),
                                                          "length": int(tokens.shape[1]), "source": "validation split"},
                               "transforms": summary})
    j.log.info("wrote scores before/after each T to %s and the summary to %s", out.table, out.summary)
