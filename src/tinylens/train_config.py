"""A training run's settings, without torch: its learning-rate phases, the run's configuration and the
checkpoint schedule (the Snakefile reads them while it plans, and every Snakemake invocation parses it;
:mod:`tinylens.train` runs them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Phase:
    """Train up to step ``until`` at learning rate ``lr`` with a fresh AdamW."""

    until: int
    lr: float


PRECISIONS = ("mixed", "float32")
BATCH_SAMPLINGS = ("separate", "original")


@dataclass(frozen=True)
class TrainConfig:
    seed: int
    batch_size: int
    phases: tuple[Phase, ...]
    eval_interval: int
    eval_iters: int
    checkpoint_steps: tuple[int, ...] = ()
    weight_decay: float = 0.01  # torch's AdamW default, as the published run used
    precision: str = "mixed"  # see the module docstring
    batch_sampling: str = "separate"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.batch_sampling not in BATCH_SAMPLINGS:
            raise ValueError(f"batch_sampling must be one of {BATCH_SAMPLINGS}, got {self.batch_sampling!r}")
        ends = [p.until for p in self.phases]
        if not ends or ends != sorted(set(ends)) or ends[0] <= 0:
            raise ValueError(f"phases must end at strictly increasing positive steps, got {ends}")
        bad = [s for s in self.checkpoint_steps if not 0 <= s <= self.max_steps]
        if bad:
            raise ValueError(f"checkpoint steps {bad} lie outside 0..{self.max_steps}")

    @property
    def max_steps(self) -> int:
        return self.phases[-1].until

    def phase_at(self, step: int) -> int:
        """Index of the phase that the update from ``step`` to ``step + 1`` belongs to."""
        return next(i for i, p in enumerate(self.phases) if step < p.until)

    @property
    def save_steps(self) -> tuple[int, ...]:
        """Checkpoint steps, always including the final one (the resume point of a finished run)."""
        return tuple(sorted(set(self.checkpoint_steps) | {self.max_steps}))


def checkpoint_schedule(first: int, count: int, phase_ends: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Checkpoint steps: 0, ``count`` log-spaced steps from ``first`` to the last step, and every
    phase end (the step where each fresh optimizer takes over, and the last step).

    Log spacing keeps the early steps dense, where the phase change of a small model can fall.
    Steps that round to the same integer are kept once, so small ``first`` values give fewer
    than ``count`` distinct steps.

    >>> checkpoint_schedule(10, 4, (800, 1000))
    (0, 10, 46, 215, 800, 1000)
    """
    if not phase_ends:
        raise ValueError("checkpoint_schedule needs the phase ends (at least the last step)")
    last = max(phase_ends)
    if not 1 <= first < last:
        raise ValueError(f"the first log-spaced checkpoint ({first}) must lie in 1..{last - 1}")
    if count < 2:
        raise ValueError(f"count ({count}) must be at least 2: the first step and the last")
    spaced = np.rint(np.geomspace(first, last, count)).astype(int).tolist()
    return tuple(sorted({0, *spaced, *phase_ends}))
