"""This family's tables (results/<preset>/circuits/): their Parquet schemas.

Free of torch, so the jobs that only read the tables start quickly.
"""

from __future__ import annotations

import pyarrow as pa

from tinylens.tables import Schema

KINDS = ("Q", "K", "V")
BASES = ("residual", "token")
LAYERNORMS = ("ignored", "folded")


def pair_label(layer_a: int, head_a: int, layer_b: int, head_b: int) -> str:
    """``"0.1 -> 2.3"``: layer.head of the earlier head, then of the later one (0-based)."""
    return f"{layer_a}.{head_a} -> {layer_b}.{head_b}"


SCORES_SCHEMA = Schema("composition scores", {
    "seed": pa.int64(),
    "step": pa.int64(),            # training step of the weights (the final model: its last step)
    "layernorm": pa.string(),      # ignored | folded
    "basis": pa.string(),          # residual | token
    "kind": pa.string(),           # Q | K | V
    "layer_a": pa.int32(), "head_a": pa.int32(),   # the earlier head (writes)
    "layer_b": pa.int32(), "head_b": pa.int32(),   # the later head (reads)
    "score": pa.float64(),
    "baseline_mean": pa.float64(),  # the same score for random heads of the same shapes
    "baseline_std": pa.float64(),
})


SYMMETRY_SCHEMA = Schema("symmetry test scores", {
    "transform": pa.string(),      # a name from make_transforms
    "basis": pa.string(),          # residual | token (LayerNorm ignored)
    "kind": pa.string(),           # Q | K | V
    "layer_a": pa.int32(), "head_a": pa.int32(), "layer_b": pa.int32(), "head_b": pa.int32(),
    "score_before": pa.float64(),  # the trained weights
    "score_after": pa.float64(),   # the weights transformed by T
})
