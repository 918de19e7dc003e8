"""Figures. One function per figure; each writes a PNG atomically."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: figures are files, never windows
import matplotlib.pyplot as plt  # noqa: E402

from tinylens.atomic import atomic_path  # noqa: E402


def _read_loss_csv(path: str | Path) -> dict[str, list[float]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {k: [float(r[k]) for r in rows] for k in ("step", "train_loss", "val_loss")}


def save_figure(fig, out: str | Path) -> None:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")
    plt.close(fig)


def plot_loss_curves(loss_csvs: Sequence[str | Path], seeds: Sequence[int], original_seed: int,
                     unigram_entropy: float, out: str | Path) -> None:
    """Train (dashed) and validation (solid) loss per seed, with the unigram entropy for scale."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path, seed in zip(loss_csvs, seeds, strict=True):
        curve = _read_loss_csv(path)
        label = f"seed {seed}" + (" (original)" if seed == original_seed else "")
        (line,) = ax.plot(curve["step"], curve["val_loss"], lw=2 if seed == original_seed else 1.2,
                          label=f"{label}: val {curve['val_loss'][-1]:.3f}")
        ax.plot(curve["step"], curve["train_loss"], ls="--", color=line.get_color(), lw=1)
    ax.axhline(unigram_entropy, color="grey", ls=":", label=f"unigram entropy {unigram_entropy:.3f}")
    ax.set(xlabel="training step", ylabel="cross-entropy (nats/char)",
           title="Loss during training (solid: validation, dashed: train)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save_figure(fig, out)
