"""Substrings, their next-token counts, and the prompt samples (method.md §3).

Every unique substring of length ``n`` (10) of the text, in sorted order, with
the counts of the character that follows each occurrence. Two count vectors
serve the three prompt modes:

- ``corpus``: counts over the whole text; prompts are drawn from the same
  strings, so each prompt matches itself; split into tuning and evaluation
  prompts.
- ``heldout``: counts over the training text only (a string counts only if
  it occurs there, and only next tokens inside it count); prompts are drawn
  from the validation text.
- ``paper``: the paper's own prompt set (method.md §12), searched like
  ``corpus``: the strings in the order of their first occurrence,
  ``torch.manual_seed(1337)``, ``torch.randperm(n_strings)[:20000]``; a
  smaller preset takes the front of the same permutation. All of them are
  evaluation prompts (in-sample, as the paper evaluated them): none is tuned
  on; they are evaluated with the paper's values and with the values tuned on
  the ``corpus`` mode's tuning prompts (:data:`TUNED_WITH`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinylens.core.schemas import PROMPTS_SCHEMA, strings_schema
from tinylens.tables import fixed_list_to_numpy, read_table, write_table

MODES = ("corpus", "heldout", "paper")
#: Which text each mode searches and counts next tokens over: the whole text, or the train text only.
SEARCHED_TEXT = {"corpus": "whole", "heldout": "train", "paper": "whole"}
#: The mode whose tuning prompts give the thresholds and weights a mode is evaluated with.
TUNED_WITH = {"corpus": "corpus", "heldout": "heldout", "paper": "corpus"}
#: Modes that tune their own thresholds and weights (they have tuning prompts).
TUNING_MODES = tuple(m for m in MODES if TUNED_WITH[m] == m)


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
        return self.next_counts if searched_text(mode) == "whole" else self.next_counts_train

    def members(self, mode: str) -> np.ndarray:
        """Which strings belong to the searched set of ``mode``."""
        return np.ones(len(self), dtype=bool) if searched_text(mode) == "whole" else self.in_train


def searched_text(mode: str) -> str:
    """``"whole"`` or ``"train"``: the text that ``mode`` searches (:data:`SEARCHED_TEXT`)."""
    if mode not in SEARCHED_TEXT:
        raise ValueError(f"unknown prompt mode {mode!r}; the modes are {', '.join(MODES)}")
    return SEARCHED_TEXT[mode]


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


def load_strings(path: str | Path, vocab_size: int, rows: np.ndarray | None = None) -> StringTable:
    """The string table, or only its ``rows`` (in that order; the Python strings and the count matrices are made
    for those rows only)."""
    t = read_table(path, strings_schema(vocab_size))
    if rows is not None:
        t = t.take(np.asarray(rows, dtype=np.int64))
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


def first_occurrence_order(ids: np.ndarray, n: int, vocab_size: int) -> np.ndarray:
    """Start positions of the unique length-``n`` windows of ``ids``, in the order of their first
    occurrence (the paper's ``all_unique_substrings``, whose strings are ``text[i:i+n]`` for these ``i``)."""
    _, first = np.unique(window_keys(ids, n, vocab_size), return_index=True)
    return np.sort(first)


def paper_permutation(n_strings: int, n_prompts: int, seed: int) -> np.ndarray:
    """The paper's draw: ``torch.manual_seed(seed); torch.randperm(n_strings)[:n_prompts]``, from a
    generator of its own (the same stream as the global one after ``manual_seed``; the global
    generator is left alone)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(n_strings, generator=generator)[:n_prompts].numpy()


def paper_prompts(text: str, ids: np.ndarray, n: int, vocab_size: int, n_prompts: int, seed: int) -> dict[str, list]:
    """The paper's prompt set (method.md §12) of ``text`` (token ids ``ids``): the first ``n_prompts``
    of its permutation of the unique length-``n`` strings in first-occurrence order; all of them
    evaluation prompts, ``prompt_id`` their rank in the permutation (the paper's prompt index)."""
    starts = first_occurrence_order(ids, n, vocab_size)
    if not 1 <= n_prompts <= len(starts):
        raise ValueError(f"{n_prompts} paper prompts asked for, but the text has {len(starts)} unique strings "
                         f"of length {n}; lower the preset's analysis.paper_prompts")
    chosen = starts[paper_permutation(len(starts), n_prompts, seed)]
    return {"prompt_id": list(range(n_prompts)), "string": [text[i : i + n] for i in chosen],
            "split": ["eval"] * n_prompts}


def prompt_shard(n_prompts: int, n_shards: int, shard: int) -> np.ndarray:
    """Rows of the prompt table in search shard ``shard`` (1-based, as Snakemake's ``<i>-of-<n>``):
    consecutive rows, shard sizes differing by at most one."""
    if not 1 <= shard <= n_shards:
        raise ValueError(f"shard {shard} is not one of 1..{n_shards}")
    if n_shards > n_prompts:
        raise ValueError(f"{n_shards} search shards for {n_prompts} prompts would leave shards empty; "
                         "lower the preset's analysis.search_shards")
    return np.array_split(np.arange(n_prompts), n_shards)[shard - 1]


def load_string_names(path: str | Path, vocab_size: int) -> tuple[list[str], np.ndarray]:
    """The string table's strings and whether each occurs in the train text, without its count matrices (the
    jobs that only look strings up: decoding the counts costs 2-4 CPU-s at the full text, these two columns 0.1)."""
    t = read_table(path, strings_schema(vocab_size), columns=["string", "in_train"])
    return t["string"].to_pylist(), t["in_train"].to_numpy(zero_copy_only=False)


def count_strings(path: str | Path) -> int:
    """Rows of the string table, from its footer."""
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def save_prompts(path: str | Path, prompts: dict[str, list]) -> None:
    write_table(path, PROMPTS_SCHEMA, prompts)


def load_prompts(path: str | Path) -> dict[str, list]:
    return read_table(path, PROMPTS_SCHEMA).to_pydict()
