"""The symmetry test and source 003's near-symmetries on the RMSNorm variant (rule rmsnorm_symmetry)."""

from pathlib import Path

from tinylens.circuits.summary import symmetry_digest
from tinylens.circuits.symmetry import make_transforms, near_symmetries, symmetry_test, token_windows
from tinylens.core.corpus import load_ids
from tinylens.core.training_log import training_digest
from tinylens.jobs import job
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp = j.params, j.input
    model = load_model(Path(inp.weights).parent)
    tokens = token_windows(load_ids(inp.val), p.sequences, model.config.block_size)
    transforms = make_transforms(model.config.d_model, p.transform_seed, tuple(p.conditions))
    _, summary = symmetry_test(model, transforms, tokens, log=j.log)
    near = near_symmetries(model, tokens, p.near_symmetry["epsilons"], p.transform_seed, log=j.log)
    j.write_json(j.output.summary, {"norm": model.config.norm, "training": training_digest(j.read_json(inp.metrics)),
                                    "transforms": symmetry_digest(summary),
                                    "near_symmetries": {**p.near_symmetry, "maps": near},
                                    "tokens": {"sequences": int(tokens.shape[0]), "length": int(tokens.shape[1])}})
