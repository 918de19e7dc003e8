"""This family's tables (results/<preset>/dynamics/seed<N>/): their Parquet schemas and column names.

Free of torch, so the jobs that only read the tables start quickly.
"""

from __future__ import annotations

import pyarrow as pa

from tinylens.tables import Schema

#: Per-head score columns of the heads table, in order.
HEAD_SCORES = ("prefix_matching", "copying_eigen", "copying_logit", "previous_token", "duplicate_token")


def depth_names(n_layer: int) -> list[str]:
    """Where the interaction energy is measured: the embedding output, after each block, after ``ln_f``."""
    return ["embed", *(f"block {b + 1}" for b in range(n_layer)), "ln_f"]


def checkpoint_schema(n_layer: int, context: int) -> Schema:
    """One row per checkpoint: ``ie``/``ie_prefix`` per depth (:func:`depth_names`), loss per position."""
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
        "ie_prefix": depths,
        "loss_by_position": pa.list_(pa.float64(), context),
    })


HEADS_SCHEMA = Schema("dynamics heads", {
    "step": pa.int64(),
    "layer": pa.int32(),
    "head": pa.int32(),
    **{name: pa.float64() for name in HEAD_SCORES},
})
