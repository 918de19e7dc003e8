"""Train the non-uniform sweep (one feature's density varied; pentagon, two-digon and random starts in
one stack) and write its tables (rule superposition_nonuniform)."""

import torch

from tinylens.logs import log_to
from tinylens.superposition.experiments import log_grid, run_nonuniform
from tinylens.superposition.schemas import NONUNIFORM_FEATURES, NONUNIFORM_MODELS
from tinylens.tables import write_table
from tinylens.train import select_device

with log_to(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    torch.set_num_threads(snakemake.threads)
    spec = p.spec
    tables = run_nonuniform(spec["fixed_sparsity"], log_grid(spec["relative_density"]), spec["random_seeds"], spec,
                            p.seed, p.threshold, select_device(p.device), progress=True)
    write_table(out.models, NONUNIFORM_MODELS, tables["models"])
    write_table(out.features, NONUNIFORM_FEATURES, tables["features"])
    log.info("trained %d models; wrote %s and %s", len(tables["models"]["seed"]), out.models, out.features)
