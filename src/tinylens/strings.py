"""Substrings, their next-token counts, and the prompt samples (method.md §3).

Every unique substring of length ``n`` (10) of the text, in sorted order, with
the counts of the character that follows each occurrence. Two count vectors
serve the two prompt modes:

- ``corpus`` (the paper's): counts over the whole text; prompts are drawn
  from the same strings, so each prompt matches itself.
- ``heldout``: counts over the training text only (a string counts only if
  it occurs there, and only next tokens inside it count); prompts are drawn
  from the validation text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tinylens.tables import Schema, fixed_list_to_numpy, read_table, write_table

MODES = ("corpus", "heldout")


def strings_schema(vocab_size: int) -> Schema:
    return Schema("strings", {
        "string": pa.string(),
        "occurrences": pa.uint32(),
        "next_counts": pa.list_(pa.uint32(), vocab_size),  # over the whole text (corpus mode)
        "in_train": pa.bool_(),
        "next_counts_train": pa.list_(pa.uint32(), vocab_size),  # over the train text (heldout mode)
    })


PROMPTS_SCHEMA = Schema("prompts", {
    "prompt_id": pa.int32(),
    "string": pa.string(),
    "split": pa.string(),  # "tune" or "eval"
})


def window_keys(ids: np.ndarray, n: int, base: int) -> np.ndarray:
    """One int64 per window ``ids[i:i+n]``, ordered like the windows (base-``base`` digits, big-endian)."""
    if base**n >= 2**63:
        raise ValueError(f"windows of {n} tokens over a vocabulary of {base} do not fit in int64 keys")
    n_windows = len(ids) - n + 1
    keys = np.zeros(n_windows, dtype=np.int64)
    for j in range(n):
        keys = keys * base + ids[j : j + n_windows].astype(np.int64)
    return keys


@dataclass(frozen=True)
class StringTable:
    strings: list[str]
    occurrences: np.ndarray  # [n_strings]
    next_counts: np.ndarray  # [n_strings vocab], uint32
    in_train: np.ndarray  # [n_strings] bool
    next_counts_train: np.ndarray  # [n_strings vocab]

    def __len__(self) -> int:
        return len(self.strings)

    def counts(self, mode: str) -> np.ndarray:
        return self.next_counts if mode == "corpus" else self.next_counts_train

    def members(self, mode: str) -> np.ndarray:
        """Which strings belong to the searched set of ``mode``."""
        return np.ones(len(self), dtype=bool) if mode == "corpus" else self.in_train


def build_strings(text: str, ids: np.ndarray, n: int, vocab_size: int, n_train: int) -> StringTable:
    """Unique length-``n`` substrings of ``text`` (token ids ``ids``) and their next-token counts.

    ``n_train``: the first ``n_train`` tokens are the training text.
    """
    keys = window_keys(ids, n, vocab_size)
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    n_unique = len(unique)
    starts = np.arange(len(keys))
    has_next = starts + n < len(ids)
    nxt = np.where(has_next, ids[np.minimum(starts + n, len(ids) - 1)], 0).astype(np.int64)

    def count(select: np.ndarray) -> np.ndarray:
        flat = np.bincount(inverse[select] * vocab_size + nxt[select], minlength=n_unique * vocab_size)
        return flat.reshape(n_unique, vocab_size).astype(np.uint32)

    in_train_window = starts + n <= n_train
    in_train = np.zeros(n_unique, dtype=bool)
    in_train[inverse[in_train_window]] = True
    return StringTable(
        strings=[text[i : i + n] for i in first],
        occurrences=np.bincount(inverse, minlength=n_unique).astype(np.uint32),
        next_counts=count(has_next),
        in_train=in_train,
        next_counts_train=count(starts + n < n_train),
    )


def save_strings(path: str | Path, table: StringTable) -> None:
    vocab = table.next_counts.shape[1]
    write_table(path, strings_schema(vocab), {
        "string": table.strings,
        "occurrences": table.occurrences,
        "next_counts": table.next_counts,
        "in_train": table.in_train,
        "next_counts_train": table.next_counts_train,
    })


def load_strings(path: str | Path, vocab_size: int) -> StringTable:
    t = read_table(path, strings_schema(vocab_size))
    return StringTable(
        strings=t["string"].to_pylist(),
        occurrences=t["occurrences"].to_numpy(),
        next_counts=fixed_list_to_numpy(t["next_counts"]),
        in_train=t["in_train"].to_numpy(zero_copy_only=False),
        next_counts_train=fixed_list_to_numpy(t["next_counts_train"]),
    )


def sample_prompts(candidates: list[str], n_prompts: int, tune_fraction: float, seed: int) -> dict[str, list]:
    """Draw ``n_prompts`` distinct strings (all of them if fewer) and split them into tune/eval."""
    rng = np.random.default_rng(seed)
    n = min(n_prompts, len(candidates))
    chosen = rng.choice(len(candidates), size=n, replace=False)
    n_tune = int(round(tune_fraction * n))
    return {
        "prompt_id": list(range(n)),
        "string": [candidates[i] for i in chosen],
        "split": ["tune"] * n_tune + ["eval"] * (n - n_tune),
    }


def heldout_candidates(val_text: str, n: int) -> list[str]:
    """Unique length-``n`` substrings of the validation text, sorted."""
    return sorted({val_text[i : i + n] for i in range(len(val_text) - n + 1)})


def heldout_regions(val_text: str, n: int, tune_fraction: float) -> tuple[list[str], list[str]]:
    """Candidates (sorted) of the held-out tuning and evaluation prompts, from disjoint regions.

    The validation text is cut at ``tune_fraction`` of its length. A tuning candidate is a string
    every occurrence of which lies wholly before the cut; an evaluation candidate one every
    occurrence of which lies wholly after it. So no evaluation prompt shares a character position
    (or its text) with any occurrence of a tuning prompt: tuning cannot see the evaluation
    prompts' windows, not even shifted by a few characters.
    """
    cut = int(round(tune_fraction * len(val_text)))
    regions: dict[str, int] = {}  # string -> bit set: 1 before the cut, 2 after it, 4 across it
    for i in range(len(val_text) - n + 1):
        region = 1 if i + n <= cut else (2 if i >= cut else 4)
        window = val_text[i : i + n]
        regions[window] = regions.get(window, 0) | region
    return (sorted(s for s, r in regions.items() if r == 1), sorted(s for s, r in regions.items() if r == 2))


def sample_split_prompts(tune_candidates: list[str], eval_candidates: list[str], n_prompts: int,
                         tune_fraction: float, seed: int) -> dict[str, list]:
    """``round(tune_fraction * n_prompts)`` tuning prompts from ``tune_candidates``, the rest from
    ``eval_candidates`` (each capped at what there is), drawn with one seeded generator."""
    rng = np.random.default_rng(seed)
    n_tune = int(round(tune_fraction * n_prompts))
    tune = rng.choice(len(tune_candidates), size=min(n_tune, len(tune_candidates)), replace=False)
    held = rng.choice(len(eval_candidates), size=min(n_prompts - n_tune, len(eval_candidates)), replace=False)
    strings = [tune_candidates[i] for i in tune] + [eval_candidates[i] for i in held]
    return {"prompt_id": list(range(len(strings))), "string": strings,
            "split": ["tune"] * len(tune) + ["eval"] * len(held)}


def prompt_sets(table: StringTable, val_text: str, n: int, n_prompts: int, tune_fraction: float,
                seed: int) -> dict[str, dict[str, list]]:
    """The prompts of both modes: ``corpus`` drawn from the searched strings themselves (the paper's
    in-sample mode), ``heldout`` from the validation text, tuning and evaluation prompts from
    disjoint regions of it (:func:`heldout_regions`)."""
    return {
        "corpus": sample_prompts(table.strings, n_prompts, tune_fraction, seed),
        "heldout": sample_split_prompts(*heldout_regions(val_text, n, tune_fraction), n_prompts, tune_fraction, seed),
    }


def prompt_shard(n_prompts: int, n_shards: int, shard: int) -> np.ndarray:
    """Rows of the prompt table in search shard ``shard`` (1-based, as Snakemake's ``<i>-of-<n>``):
    consecutive rows, shard sizes differing by at most one."""
    if not 1 <= shard <= n_shards:
        raise ValueError(f"shard {shard} is not one of 1..{n_shards}")
    if n_shards > n_prompts:
        raise ValueError(f"{n_shards} search shards for {n_prompts} prompts would leave shards empty; "
                         "lower the preset's analysis.search_shards")
    return np.array_split(np.arange(n_prompts), n_shards)[shard - 1]


def save_prompts(path: str | Path, prompts: dict[str, list]) -> None:
    write_table(path, PROMPTS_SCHEMA, prompts)


def load_prompts(path: str | Path) -> dict[str, list]:
    return read_table(path, PROMPTS_SCHEMA).to_pydict()
