"""The training mixture and the fixed probes of the phase-change runs (method.md §8b).

Training windows: with probability ``repeat_fraction`` a window is a chunk of train-split text of a
random period p (uniform over ``period_min..period_max``) tiled to fill the window, otherwise a
plain window of text. The second dataset (``source: random``) has no text at all: its chunks and
plain windows are random tokens (uniform over the tokens of the train split). Probes:
validation-split windows (natural text, and the same mixture), and sequences of distinct random
tokens repeated at each of ``probe_periods``, which must be alias-free (no multiple of a probe
period below the context is a multiple of a training period,
:func:`tinylens.phase_change.detect.aliases`), so a head that only looks back a fixed distance
learnt from the data does not score as an induction head.

>>> tiled(np.arange(3), 7).tolist()
[0, 1, 2, 0, 1, 2, 0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinylens.dynamics.probes import repeat_candidates, windows
from tinylens.measures import unigram
from tinylens.phase_change.detect import aliases, common_lookback, lookback_periods

#: Where a run's windows come from: TinyShakespeare's text, or random tokens (the second dataset).
SOURCES = ("text", "random")


@dataclass(frozen=True)
class MixtureSettings:
    """The training data of one run: ``repeat_fraction`` of the windows repeated at a period drawn
    uniformly from ``period_min..period_max`` (inclusive); ``source``: text (TinyShakespeare) or random
    (random tokens, no text)."""

    repeat_fraction: float
    period_min: int
    period_max: int
    source: str = "text"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"phase_change mixture source must be one of {SOURCES}, got {self.source!r}")
        if not 0 <= self.repeat_fraction <= 1:
            raise ValueError(f"repeat_fraction must lie in [0, 1], got {self.repeat_fraction}")
        if not 2 <= self.period_min <= self.period_max:
            raise ValueError(f"need 2 <= period_min <= period_max, got {self.period_min}..{self.period_max}")

    @property
    def label(self) -> str:
        name = "TinyShakespeare" if self.source == "text" else "random tokens"
        if self.repeat_fraction == 0:
            return name
        return f"{name}, {self.repeat_fraction:.0%} of windows repeated at period {self.period_min}-{self.period_max}"

    def lookbacks_in(self, context: int) -> list[int]:
        """The look-back periods (fixed look-back distance + 1) this mixture rewards within ``context``
        positions: the training periods and their multiples (none when no window repeats)."""
        return lookback_periods(self.period_min, self.period_max, context) if self.repeat_fraction > 0 else []


def tiled(chunk: np.ndarray, length: int) -> np.ndarray:
    """``chunk`` repeated to ``length`` tokens."""
    return np.resize(chunk, length)


def mixture_source(train_ids: np.ndarray, mixture: MixtureSettings) -> np.ndarray:
    """What :func:`mixture_windows` draws from: the token ids (text), or the distinct tokens (random)."""
    return train_ids if mixture.source == "text" else np.unique(train_ids)


def mixture_windows(ids: np.ndarray, n: int, length: int, mixture: MixtureSettings,
                    rng: np.random.Generator) -> np.ndarray:
    """``n`` windows of ``length`` tokens of the mixture: ``[n length]`` int64. ``ids``: the token ids of the
    text, or for a random source the tokens to draw from (:func:`mixture_source`)."""
    repeated = rng.random(n) < mixture.repeat_fraction
    periods = rng.integers(mixture.period_min, mixture.period_max + 1, size=n)
    if mixture.source == "random":
        rows = [tiled(rng.choice(ids, size=p), length) if r else rng.choice(ids, size=length)
                for p, r in zip(periods, repeated)]
        return np.stack(rows).astype(np.int64)
    starts = rng.integers(0, len(ids) - length + 1, size=n)
    rows = [tiled(ids[s : s + p], length) if r else ids[s : s + length]
            for s, p, r in zip(starts, periods, repeated)]
    return np.stack(rows).astype(np.int64)


@dataclass(frozen=True)
class ProbeSettings:
    """The fixed probes (config ``phase_change.probes``): ``val_windows`` natural and ``mixture_windows``
    mixture validation windows per checkpoint, ``final_windows`` for the final ICL score, ``energy_windows`` for the
    interaction energy, ``sequences`` random-token sequences per probe period, tokens not among the
    ``exclude`` most or least frequent, the ICL bands (0-based, inclusive) and single positions,
    ``baseline_samples`` random head pairs of the K-composition baseline, ``seed`` (one for every run:
    the probes never depend on the seed being measured)."""

    val_windows: int
    mixture_windows: int
    final_windows: int
    energy_windows: int
    probe_periods: tuple[int, ...]
    sequences: int
    exclude: int
    early_band: tuple[int, int]
    late_band: tuple[int, int]
    single_positions: tuple[int, int]
    baseline_samples: int
    seed: int

    def __post_init__(self) -> None:
        for name in ("probe_periods", "early_band", "late_band", "single_positions"):
            object.__setattr__(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True)
class Probes:
    """val, mixture, final: ``[n context+1]``; repeated: ``{period: [sequences context+1]}``;
    unigram: ``[vocab]`` train-split frequencies."""

    val: np.ndarray
    mixture: np.ndarray
    final: np.ndarray
    repeated: dict[int, np.ndarray]
    unigram: np.ndarray


def probe_period_problems(probe_periods, mixture: MixtureSettings, context: int) -> list[str]:
    """What makes ``probe_periods`` unfit for a run of ``mixture`` at ``context`` tokens (empty: nothing): a
    period aliased with the training periods (:func:`tinylens.phase_change.detect.aliases`), one that does
    not repeat twice in the context, periods whose least common multiple lies inside the context."""
    problems = []
    lookbacks = mixture.lookbacks_in(context)
    for p in probe_periods:
        shared = aliases(p, context, lookbacks)
        if shared:
            problems.append(f"{p} is aliased with the training periods {mixture.period_min}-{mixture.period_max}: "
                            f"its multiple(s) {shared} are multiples of a training period within the context "
                            f"({context}), so a head that looks a fixed distance back would score at it like an "
                            f"induction head; probe at a period none of whose multiples below the context is")
        if 2 * p > context + 1:
            problems.append(f"{p} repeated twice exceeds the context ({context})")
    lcm = common_lookback(list(probe_periods), context)
    if lcm is not None:
        problems.append(f"{list(probe_periods)} have a least common multiple ({lcm}) inside the context ({context}): "
                        f"one fixed look-back of {lcm - 1} would match every period")
    return problems


def check_probe_periods(probe_periods, mixture: MixtureSettings, context: int) -> None:
    """Raise ValueError naming each of :func:`probe_period_problems`."""
    problems = probe_period_problems(probe_periods, mixture, context)
    if problems:
        raise ValueError("phase_change.probes.probe_periods: " + "; ".join(problems))


def make_probes(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int, context: int,
                mixture: MixtureSettings, settings: ProbeSettings) -> Probes:
    """The probes of one run; everything but the mixture windows is the same for every run of a preset."""
    check_probe_periods(settings.probe_periods, mixture, context)
    candidates = repeat_candidates(np.bincount(train_ids, minlength=vocab_size), settings.exclude)
    rng = np.random.default_rng(settings.seed)
    repeated = {}
    for p in settings.probe_periods:
        if p > len(candidates):
            raise ValueError(f"phase_change.probes.probe_periods: {p} distinct tokens needed, "
                             f"{len(candidates)} candidates remain after excluding {settings.exclude}")
        segments = np.stack([rng.choice(candidates, size=p, replace=False) for _ in range(settings.sequences)])
        repeated[p] = np.stack([tiled(s, context + 1) for s in segments]).astype(np.int64)
    return Probes(
        val=windows(val_ids, settings.val_windows, context + 1, settings.seed + 1),
        mixture=mixture_windows(mixture_source(val_ids, mixture), settings.mixture_windows, context + 1, mixture,
                                np.random.default_rng(settings.seed + 2)),
        final=windows(val_ids, settings.final_windows, context + 1, settings.seed + 3),
        repeated=repeated,
        unigram=unigram(train_ids, vocab_size, pseudocount=0.5),
    )
