"""Train the feature-dimensionality sweep (one model per sparsity, W kept over training), find the jumps
of D_i, and write the tables (rule superposition_dimensionality)."""

from fractions import Fraction

from tinylens.jobs import job
from tinylens.superposition.experiments import run_dimensionality
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.schemas import (
    DIMENSIONALITY_FEATURES,
    DIMENSIONALITY_JUMPS,
    DIMENSIONALITY_MODELS,
    DIMENSIONALITY_TRAINING,
)
from tinylens.tables import write_table

with job(snakemake) as j:
    p, out = j.params, j.output
    spec = p.spec
    fractions = parse_fractions(p.fractions)
    tables = run_dimensionality(
        spec["features"], spec["hidden"], spec["sparsities"], spec, spec["snapshots"], fractions, p.tolerance,
        jump_levels=sorted({*fractions, Fraction(0)}, reverse=True), jumps=p.jumps, seed=p.seed,
        threshold=p.threshold, device=j.device, progress=True,
    )
    write_table(out.models, DIMENSIONALITY_MODELS, tables["models"])
    write_table(out.features, DIMENSIONALITY_FEATURES, tables["features"])
    write_table(out.training, DIMENSIONALITY_TRAINING, tables["training"])
    write_table(out.jumps, DIMENSIONALITY_JUMPS, tables["jumps"])
    j.log.info("%d jumps of D_i found; wrote %s, %s, %s, %s", len(tables["jumps"]["step"]), out.models, out.features,
               out.training, out.jumps)
