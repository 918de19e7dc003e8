"""What a training run leaves for the rest of the workflow, read without torch: the loss curve's table,
the keys of ``metrics.json`` and the summary over seeds (figures and summaries import this, not
:mod:`tinylens.train`, whose torch import would be most of their cost)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinylens.core.schemas import LOSS_SCHEMA
from tinylens.tables import read_csv

LOSS_COLUMNS = tuple(LOSS_SCHEMA.columns)
#: Keys of metrics.json, documented in the README.
METRICS_KEYS = (
    "seed", "steps", "train_loss", "val_loss", "n_params", "tokens_seen",
    "train_seconds", "tokens_per_second", "device", "autocast_dtype", "compile", "torch_version",
)


def load_loss_curve(path: str | Path) -> dict[str, np.ndarray]:
    """``loss.csv`` as columns (numpy arrays), checked against :data:`LOSS_SCHEMA`."""
    table = read_csv(path, LOSS_SCHEMA)
    return {k: table[k].to_numpy() for k in LOSS_COLUMNS}


def training_digest(metrics: dict) -> dict:
    """How one model was trained, from its ``metrics.json``: what a sentence comparing two models names
    (``{"seed", "steps", "val_loss"}``)."""
    return {k: metrics[k] for k in ("seed", "steps", "val_loss")}


def summarize_training(metrics: list[dict], original_seed: int) -> dict:
    """One JSON for all seeds: each model's final losses, and the alternates' spread."""
    by_seed = {str(m["seed"]): {k: m[k] for k in ("train_loss", "val_loss", "steps", "train_seconds")}
               for m in metrics}
    val = np.array([m["val_loss"] for m in metrics])
    return {
        "original_seed": original_seed,
        "val_loss_original": by_seed[str(original_seed)]["val_loss"],
        "val_loss_mean": round(float(val.mean()), 6),
        "val_loss_std": round(float(val.std(ddof=1)) if len(val) > 1 else 0.0, 6),
        "models": by_seed,
    }
