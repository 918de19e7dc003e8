"""Schemas of the superposition family's Parquet tables (results/<preset>/superposition/).

Kept apart from the maths so that figure scripts read the tables without importing torch.
"""

from collections.abc import Mapping

import pyarrow as pa

from tinylens.tables import Schema

F32, F64, I64, STR, BOOL = pa.float32(), pa.float64(), pa.int64(), pa.string(), pa.bool_()
W2 = pa.list_(pa.float32(), 2)

UNIFORM_MODELS = Schema("superposition uniform-sweep models", {
    "sparsity": F64, "seed": I64, "loss": F64, "train_loss": F64, "n_represented": I64, "polygon": STR,
})
UNIFORM_FEATURES = Schema("superposition uniform-sweep features", {
    "sparsity": F64, "seed": I64, "feature": I64, "w": W2, "norm": F32, "angle_deg": F32,
    "dimensionality": F32, "bias": F32,
})
NONUNIFORM_MODELS = Schema("superposition non-uniform models", {
    "odd_density": F64, "relative_density": F64, "start": STR, "seed": I64, "loss": F64, "train_loss": F64,
    "n_represented": I64, "polygon": STR, "odd_norm": F32, "kept_start_geometry": BOOL,
})
NONUNIFORM_FEATURES = Schema("superposition non-uniform features", {
    "odd_density": F64, "start": STR, "seed": I64, "feature": I64, "w": W2, "norm": F32,
    "dimensionality": F32, "bias": F32,
})
DIMENSIONALITY_MODELS = Schema("superposition dimensionality models", {
    "sparsity": F64, "train_loss": F64, "dims_per_feature": F64, "n_represented": I64,
})
DIMENSIONALITY_FEATURES = Schema("superposition dimensionality features", {
    "sparsity": F64, "feature": I64, "norm": F32, "dimensionality": F32, "nearest_fraction": STR, "distance": F32,
})
DIMENSIONALITY_TRAINING = Schema("superposition dimensionality over training", {
    "sparsity": F64, "step": I64, "feature": I64, "norm": F32, "dimensionality": F32,
})
DIMENSIONALITY_JUMPS = Schema("superposition dimensionality jumps", {
    "sparsity": F64, "feature": I64, "step": I64, "from_fraction": STR, "to_fraction": STR,
    "left_step": I64, "arrive_step": I64, "noise": F64, "size_over_noise": F64, "exceeds_noise": BOOL,
})
PHASE_MODELS = Schema("superposition phase-diagram models", {
    "importance": F64, "density": F64, "seed": I64, "loss": F64, "regime": STR, "w0": F32, "w1": F32,
    "b0": F32, "b1": F32,
})
PHASE_CELLS = Schema("superposition phase-diagram cells", {
    "importance": F64, "density": F64, "trained_regime": STR, "analytic_regime": STR, "seeds_in_analytic": I64,
})
PHASE_BOUNDARY = Schema("superposition phase-diagram boundary", {
    "importance": F64, "analytic_density": F64, "trained_density": F64,
})
CORRELATED_MODELS = Schema("superposition correlated-feature models", {
    "setting": STR, "kind": STR, "sparsity": F64, "seed": I64, "train_loss": F64,
})
CORRELATED_FEATURES = Schema("superposition correlated-feature features", {
    "setting": STR, "seed": I64, "feature": I64, "group": I64, "w": W2, "norm": F64,
})
CORRELATED_PAIRS = Schema("superposition correlated-feature pairs", {
    "setting": STR, "seed": I64, "i": I64, "j": I64, "pair_type": STR, "cos": F64, "relation": STR,
})
CORRELATED_GROUPS = Schema("superposition correlated-feature groups", {
    "setting": STR, "seed": I64, "group": I64, "principal_share": F64, "represented": I64,
})

#: every table of the family, by file stem
TABLES = {
    "uniform_models": UNIFORM_MODELS,
    "uniform_features": UNIFORM_FEATURES,
    "nonuniform_models": NONUNIFORM_MODELS,
    "nonuniform_features": NONUNIFORM_FEATURES,
    "dimensionality_models": DIMENSIONALITY_MODELS,
    "dimensionality_features": DIMENSIONALITY_FEATURES,
    "dimensionality_training": DIMENSIONALITY_TRAINING,
    "dimensionality_jumps": DIMENSIONALITY_JUMPS,
    "phase_models": PHASE_MODELS,
    "phase_cells": PHASE_CELLS,
    "phase_boundary": PHASE_BOUNDARY,
    "correlated_models": CORRELATED_MODELS,
    "correlated_features": CORRELATED_FEATURES,
    "correlated_pairs": CORRELATED_PAIRS,
    "correlated_groups": CORRELATED_GROUPS,
}


def check_config(preset: Mapping, config: Mapping, where: str) -> list[str]:
    """What the schema cannot say of a preset's ``superposition`` (``where``: the preset's key,
    ``presets.<name>``), one line per problem."""
    spec, where = preset["superposition"], f"{where}.superposition"
    problems = []
    dim = spec["dimensionality"]
    if dim["hidden"] >= dim["features"]:
        problems.append(f"config key '{where}.dimensionality.hidden' ({dim['hidden']}) must be smaller than "
                        f"'features' ({dim['features']}): superposition needs more features than dimensions")
    if not any(abs(s - spec["dynamics_sparsity"]) < 1e-9 for s in dim["sparsities"]):
        problems.append(f"config key '{where}.dynamics_sparsity' ({spec['dynamics_sparsity']}) must be one of "
                        f"'dimensionality.sparsities' {dim['sparsities']}")
    if dim["snapshots"] > dim["steps"]:
        problems.append(f"config key '{where}.dimensionality.snapshots' ({dim['snapshots']}) exceeds its "
                        f"'steps' ({dim['steps']})")
    for key, grid in (("nonuniform.relative_density", spec["nonuniform"]["relative_density"]),
                      ("phase_diagram.importance", spec["phase_diagram"]["importance"]),
                      ("phase_diagram.density", spec["phase_diagram"]["density"])):
        if not grid["min"] < grid["max"]:
            problems.append(f"config key '{where}.{key}': min ({grid['min']}) must be below max ({grid['max']})")
    if spec["phase_diagram"]["density"]["max"] > 1:
        problems.append(f"config key '{where}.phase_diagram.density.max' must be at most 1 (a probability)")
    return problems
