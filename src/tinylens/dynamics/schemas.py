"""This family's tables (results/<preset>/dynamics/seed<N>/): their Parquet schemas and column names.

Free of torch, so the jobs that only read the tables start quickly.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tinylens.tables import Schema

#: Per-head score columns of the heads table, in order.
HEAD_SCORES = ("prefix_matching", "copying_eigen", "copying_logit", "previous_token", "duplicate_token")


def depth_names(n_layer: int) -> list[str]:
    """Where the interaction energy is measured: the embedding output, after each block, after ``ln_f``."""
    return ["embed", *(f"block {b + 1}" for b in range(n_layer)), "ln_f"]


def checkpoint_schema(n_layer: int, context: int) -> Schema:
    """One row per checkpoint: ``ie``/``ie_prefix`` per depth (:func:`depth_names`) with the standard error of
    ``ie`` over the energy windows, per step along the forward pass (depth d to d + 1) the windows whose IE rises
    there, and the loss per position."""
    depths = pa.list_(pa.float64(), n_layer + 2)
    return Schema("dynamics checkpoints", {
        "step": pa.int64(),
        "tokens_seen": pa.int64(),
        "train_loss": pa.float64(),
        "val_loss": pa.float64(),
        "icl_score": pa.float64(),
        "icl_score_se": pa.float64(),
        "icl_band": pa.float64(),
        "icl_band_se": pa.float64(),
        "kl_model_unigram": pa.float64(),
        "kl_unigram_model": pa.float64(),
        "unigram_direction_kl": pa.float64(),
        "ie": depths,
        "ie_se": depths,
        "ie_rises": pa.list_(pa.int32(), n_layer + 1),  # windows whose IE at depth d + 1 exceeds that at d
        "ie_windows": pa.int64(),  # the energy windows
        "ie_prefix": depths,
        "loss_by_position": pa.list_(pa.float64(), context),
    })


HEADS_SCHEMA = Schema("dynamics heads", {
    "step": pa.int64(),
    "layer": pa.int32(),
    "head": pa.int32(),
    **{name: pa.float64() for name in HEAD_SCORES},
})


def check_config(preset: Mapping, config: Mapping, where: str) -> list[str]:
    """What the schema cannot say of a preset's ``dynamics`` (``where``: the preset's key, ``presets.<name>``):
    the positions, bands and repeated sequences fit the context, the energy windows are validation windows."""
    key = f"{where}.dynamics.measure"
    measure, context = preset["dynamics"]["measure"], preset["model"]["block_size"]
    problems = []
    early, late = measure["icl_positions"]
    if not early < late < context:
        problems.append(f"config key '{key}.icl_positions' ({[early, late]}) must be "
                        f"[early, late] with early < late < the context length (model.block_size = {context})")
    (a, b), (c, d) = measure["icl_bands"]
    if not (a <= b < c <= d < context):
        problems.append(f"config key '{key}.icl_bands' ({measure['icl_bands']}) must be "
                        f"[[a, b], [c, d]] with a <= b < c <= d < the context length (model.block_size = {context})")
    repeat = measure["repeat"]
    if repeat["length"] * repeat["copies"] > context:
        problems.append(f"config key '{key}.repeat': {repeat['copies']} copies of "
                        f"{repeat['length']} tokens exceed the context length ({context})")
    if measure["energy_windows"] > measure["val_windows"]:
        problems.append(f"config key '{key}.energy_windows' ({measure['energy_windows']}) "
                        f"must not exceed '{key}.val_windows' ({measure['val_windows']})")
    return problems
