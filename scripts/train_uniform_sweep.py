"""Train the uniform-sparsity sweep (n features in 2 dims, every setting and seed in one stack) and
write its tables (rule superposition_uniform)."""

import torch

from tinylens.logs import log_to
from tinylens.superposition.experiments import run_uniform
from tinylens.superposition.schemas import UNIFORM_FEATURES, UNIFORM_MODELS
from tinylens.tables import write_table
from tinylens.train import select_device

with log_to(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    torch.set_num_threads(snakemake.threads)
    spec = p.spec
    tables = run_uniform(spec["features"], spec["sparsities"], spec["seeds"], spec["importance_decay"], spec,
                         p.seed, p.threshold, select_device(p.device), progress=True)
    write_table(out.models, UNIFORM_MODELS, tables["models"])
    write_table(out.features, UNIFORM_FEATURES, tables["features"])
    log.info("trained %d models; wrote %s and %s", len(tables["models"]["seed"]), out.models, out.features)
