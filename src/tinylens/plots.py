"""What every family's figures share: :func:`save_figure` writes one as a PNG, atomically (a figure's script
calls it through ``tinylens.jobs.Job.save_figure``); :func:`step_axis` is the training-step axis; ``plt`` is
pyplot on the Agg backend. Each family's ``plots`` module holds its figures, one ``make_<figure>`` function a
figure that builds it from plain data and returns the :class:`~matplotlib.figure.Figure` (so tests can read
what is drawn).

Figures are built with :class:`matplotlib.figure.Figure` directly, not through ``pyplot``: no
backend is chosen, no window can open and no global figure state is kept, so importing this
module changes nothing in the importing program.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from tinylens.atomic import atomic_path


def __getattr__(name: str):
    """``from tinylens.plots import plt``: pyplot, for figure code written with it, on the Agg backend
    (figures are files, never windows). The backend is set here, when figure code asks for pyplot,
    not when this module is imported."""
    if name == "plt":
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def save_figure(fig: Figure, out: str | Path) -> None:
    """Write ``fig`` as a PNG at ``out`` atomically (a figure made with pyplot is closed too)."""
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")
    if getattr(fig.canvas, "manager", None) is not None:  # made with pyplot: release it
        import matplotlib.pyplot as plt

        plt.close(fig)


def step_axis(ax, steps: np.ndarray, label: bool = True, linscale: float = 0.4) -> None:
    """A training-step x axis: logarithmic above the first positive checkpoint, linear below it (so step 0
    is drawn), with a grid; the label says where the scale changes."""
    first = float(steps[steps > 0].min())
    ax.set_xscale("symlog", linthresh=first, linscale=linscale)
    ax.set_xlim(0, float(steps.max()) * 1.05)
    if label:
        ax.set_xlabel(f"training step (log; linear below {first:g})")
    ax.grid(alpha=0.3)
