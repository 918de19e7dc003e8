"""The fixed inputs every checkpoint of every seed is measured on (method.md §8).

Everything here is a pure function of the token ids and a seed, so every job draws exactly the
same windows and sequences: the curves of different checkpoints and seeds differ only by the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tinylens.measures import unigram

#: Added to every character count of the unigram, so a character absent from the train split (the
#: ``test`` preset's slice lacks four) keeps KL(model || unigram) finite; 0.5 / 1M is negligible
#: for the full corpus.
UNIGRAM_PSEUDOCOUNT = 0.5


@dataclass(frozen=True)
class RepeatSettings:
    """The prefix-matching sequences: ``length`` distinct random tokens (not among the ``exclude`` most or
    least frequent) repeated ``copies`` times, ``sequences`` of them."""

    length: int
    copies: int
    sequences: int
    exclude: int


@dataclass(frozen=True)
class UnigramDirectionSettings:
    """L-BFGS starts and iterations of the one trainable vector of the unigram direction."""

    restarts: int
    steps: int


@dataclass(frozen=True)
class MeasureSettings:
    """What every checkpoint is measured on, and how (config key ``dynamics.measure``).

    val_windows, train_windows: windows at full context for the losses; energy_windows: the first this
    many validation windows give the interaction energy; icl_positions: (early, late), 0-based, the
    single-position ICL score; icl_bands: (early band, late band), each (first, last) 0-based inclusive,
    the band ICL score (:mod:`tinylens.dynamics.icl`); seed:
    draws the windows, the repeated sequences and the unigram direction's starts. The nested entries
    may be given as the config's mappings.
    """

    val_windows: int
    train_windows: int
    energy_windows: int
    icl_positions: tuple[int, int]
    icl_bands: tuple[tuple[int, int], tuple[int, int]]
    repeat: RepeatSettings
    unigram_direction: UnigramDirectionSettings
    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "icl_positions", tuple(self.icl_positions))
        object.__setattr__(self, "icl_bands", tuple(tuple(band) for band in self.icl_bands))
        for name, kind in (("repeat", RepeatSettings), ("unigram_direction", UnigramDirectionSettings)):
            if isinstance(getattr(self, name), Mapping):
                object.__setattr__(self, name, kind(**getattr(self, name)))


@dataclass(frozen=True)
class Probes:
    """val, train: ``[n context+1]`` token windows (inputs are ``[:, :-1]``, targets ``[:, 1:]``);
    repeated: ``[m copies*repeat_length]``; unigram: ``[vocab]`` train-split frequencies."""

    val: np.ndarray
    train: np.ndarray
    repeated: np.ndarray
    repeat_length: int
    unigram: np.ndarray


def windows(ids: np.ndarray, n: int, length: int, seed: int) -> np.ndarray:
    """``n`` windows of ``length`` consecutive tokens at random starts (drawn with ``seed``), ``[n length]``."""
    if len(ids) < length:
        raise ValueError(f"{len(ids)} tokens are too few for windows of {length}")
    starts = np.random.default_rng(seed).integers(0, len(ids) - length + 1, size=n)
    return np.stack([ids[s : s + length] for s in starts]).astype(np.int64)


def repeat_candidates(frequencies: np.ndarray, exclude: int) -> np.ndarray:
    """Token ids by frequency without the ``exclude`` most and ``exclude`` least frequent, nor any
    token that never occurs."""
    order = np.argsort(-frequencies, kind="stable")
    order = order[frequencies[order] > 0]
    kept = order[exclude : len(order) - exclude]
    return np.sort(kept)


def repeated_sequences(candidates: np.ndarray, n: int, length: int, copies: int, seed: int) -> np.ndarray:
    """``n`` sequences of ``length`` distinct random tokens from ``candidates``, each repeated
    ``copies`` times: ``[n copies*length]``. Distinct tokens within a repeat make the prefix-matching
    target unique: in repeat r the earlier occurrences of a token are the same slot of repeats 1..r-1."""
    if length > len(candidates):
        raise ValueError(f"a repeat of {length} distinct tokens needs at least {length} candidate tokens, "
                         f"only {len(candidates)} remain after the exclusions")
    rng = np.random.default_rng(seed)
    segments = np.stack([rng.choice(candidates, size=length, replace=False) for _ in range(n)])
    return np.tile(segments, (1, copies)).astype(np.int64)


def make_probes(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int, context: int,
                settings: MeasureSettings) -> Probes:
    """The probes of one preset: ``val_windows`` validation and ``train_windows`` train windows at full
    ``context`` (+1 for the targets), the repeated random-token sequences, the unigram of the train split."""
    repeat_length, copies, seed = settings.repeat.length, settings.repeat.copies, settings.seed
    if repeat_length * copies > context:
        raise ValueError(f"{copies} repeats of {repeat_length} tokens ({repeat_length * copies}) exceed the "
                         f"context of {context}")
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size)
    return Probes(
        val=windows(val_ids, settings.val_windows, context + 1, seed),
        train=windows(train_ids, settings.train_windows, context + 1, seed + 1),
        repeated=repeated_sequences(repeat_candidates(counts, settings.repeat.exclude), settings.repeat.sequences,
                                    repeat_length, copies, seed + 2),
        repeat_length=repeat_length,
        unigram=unigram(train_ids, vocab_size, pseudocount=UNIGRAM_PSEUDOCOUNT),
    )
