"""The in-context-learning score with its standard error (method.md §8b).

Olsson et al.'s score is the loss at one late position minus the loss at one early one (their
500th and 50th tokens); on a character model over a few hundred windows that difference of two
single positions is mostly noise. Here the score is the loss averaged over a band of late positions
minus the loss averaged over a band of early ones, per window, averaged over windows; its standard
error is the standard deviation of the per-window differences over sqrt(windows). Negative: the
model predicts better late in the context than early, i.e. it uses the context.

>>> import numpy as np
>>> loss = np.array([[3.0, 3.0, 2.0, 2.0], [3.0, 3.0, 2.0, 2.0]])
>>> icl_score(loss, (0, 1), (2, 3))
(-1.0, 0.0)
"""

from __future__ import annotations

import numpy as np

from tinylens.measures import standard_error


def icl_differences(loss: np.ndarray, early: tuple[int, int], late: tuple[int, int]) -> np.ndarray:
    """Per window: mean loss over positions late[0]..late[1] minus over early[0]..early[1] (0-based,
    inclusive); loss ``[windows pos]`` -> ``[windows]``."""
    loss = np.asarray(loss, dtype=np.float64)
    for name, (a, b) in (("early", early), ("late", late)):
        if not 0 <= a <= b < loss.shape[1]:
            raise ValueError(f"the {name} band {a}..{b} must lie inside positions 0..{loss.shape[1] - 1}")
    return loss[:, late[0] : late[1] + 1].mean(1) - loss[:, early[0] : early[1] + 1].mean(1)


def icl_score(loss: np.ndarray, early: tuple[int, int], late: tuple[int, int]) -> tuple[float, float]:
    """(mean, standard error) of :func:`icl_differences` over the windows."""
    d = icl_differences(loss, early, late)
    return float(d.mean()), standard_error(d)


def single_position_score(loss: np.ndarray, positions: tuple[int, int]) -> tuple[float, float]:
    """Olsson et al.'s form: loss at ``positions[1]`` minus at ``positions[0]``, (mean, standard error)."""
    return icl_score(loss, (positions[0], positions[0]), (positions[1], positions[1]))
