"""Train the feature-dimensionality sweep (one model per sparsity, W kept over training), find the jumps
of D_i, and write the tables (rule superposition_dimensionality)."""

from fractions import Fraction

import torch

from tinylens.logs import log_to
from tinylens.superposition.experiments import run_dimensionality
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.schemas import (
    DIMENSIONALITY_FEATURES,
    DIMENSIONALITY_JUMPS,
    DIMENSIONALITY_MODELS,
    DIMENSIONALITY_TRAINING,
)
from tinylens.tables import write_table
from tinylens.train import select_device

with log_to(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    torch.set_num_threads(snakemake.threads)
    spec = p.spec
    fractions = parse_fractions(p.fractions)
    tables = run_dimensionality(
        spec["features"], spec["hidden"], spec["sparsities"], spec, spec["snapshots"], fractions, p.tolerance,
        jump_levels=sorted({*fractions, Fraction(0)}, reverse=True), jumps=p.jumps, seed=p.seed,
        threshold=p.threshold, device=select_device(p.device), progress=True,
    )
    write_table(out.models, DIMENSIONALITY_MODELS, tables["models"])
    write_table(out.features, DIMENSIONALITY_FEATURES, tables["features"])
    write_table(out.training, DIMENSIONALITY_TRAINING, tables["training"])
    write_table(out.jumps, DIMENSIONALITY_JUMPS, tables["jumps"])
    log.info("%d jumps of D_i found; wrote %s, %s, %s, %s", len(tables["jumps"]["step"]), out.models, out.features,
             out.training, out.jumps)
