"""This family's tables (results/<preset>/phase_change/<run>/): their Parquet schemas.

Free of torch, so the summary and figure jobs start quickly.
"""

from __future__ import annotations

import pyarrow as pa

from tinylens.tables import Schema

#: Float columns of the curves table measured at every checkpoint.
CURVE_COLUMNS = ("tokens", "lr", "train_loss", "val_loss", "icl", "icl_se", "icl_single", "icl_single_se",
                 "mixture_loss", "mixture_icl", "mixture_icl_se", "copy_loss_drop", "copy_loss_drop_se",
                 "energy", "kl_unigram", "cpu_seconds")
#: Loss per context position, natural text and the training mixture, ``[checkpoint context]``.
POSITION_COLUMNS = ("loss_by_position", "mixture_loss_by_position")
#: Measured at the last checkpoint only (NaN elsewhere): the ICL score on ``final_windows`` windows.
FINAL_COLUMNS = ("final_icl", "final_icl_se", "final_icl_single", "final_icl_single_se")


def curves_schema(context: int) -> Schema:
    """One row per checkpoint."""
    return Schema("phase-change curves", {
        "step": pa.int64(),
        **{name: pa.float64() for name in CURVE_COLUMNS},
        **{name: pa.float64() for name in FINAL_COLUMNS},
        "loss_by_position": pa.list_(pa.float64(), context),  # natural validation text
        "mixture_loss_by_position": pa.list_(pa.float64(), context),  # the training mixture's held-out windows
    })


HEADS_SCHEMA = Schema("phase-change heads", {
    "step": pa.int64(),
    "layer": pa.int32(),
    "head": pa.int32(),
    "period": pa.int32(),
    "prefix_matching": pa.float64(),
    "prefix_matching_se": pa.float64(),
    "copying": pa.float64(),
})


def rows_to_columns(rows: list[dict], names) -> dict[str, list]:
    """Rows (dicts) -> columns, a name missing from a row read as NaN (the tables hold no nulls)."""
    return {name: [r.get(name, float("nan")) for r in rows] for name in names}
