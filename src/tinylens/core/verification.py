"""Re-checks of the search against the float64 brute force, on a seeded random sample of prompt ids.

The search writes per-(prompt, block) summaries keyed by ``prompt_id``; the
activation dumps of the prompts are in the row order of the prompt table.
Every lookup here goes by id, never by row position, and a sampled id missing
from either side is an error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np

from tinylens.core.search import search_block_bruteforce


def sample_prompt_ids(prompt_ids: Sequence[int], n: int, seed: int, salt: str = "") -> np.ndarray:
    """``min(n, len(prompt_ids))`` distinct ids drawn at random from ``prompt_ids`` (sorted), reproducible
    from ``seed``; ``salt`` (e.g. the prompt mode) gives each caller its own draw."""
    if n < 1:
        raise ValueError(f"at least one prompt must be re-checked, got {n}")
    ids = np.asarray(prompt_ids)
    rng = np.random.default_rng([seed, zlib.crc32(salt.encode())])
    return np.sort(rng.choice(ids, size=min(n, len(ids)), replace=False))


def rows_of(ids: np.ndarray, table_ids: np.ndarray, what: str) -> np.ndarray:
    """Row of each id in ``table_ids``; an id not there is an error naming ``what``."""
    index = {int(i): r for r, i in enumerate(np.asarray(table_ids))}
    missing = [int(i) for i in ids if int(i) not in index]
    if missing:
        raise ValueError(f"prompt ids {missing[:10]} are not in {what}; the tables are from different runs")
    return np.array([index[int(i)] for i in ids], dtype=np.int64)


def verify_search(sample_ids: np.ndarray, summary_ids: np.ndarray, matches: np.ndarray, counts: np.ndarray,
                  prompt_ids: Sequence[int], prompt_block: Callable[[int], np.ndarray],
                  string_block: Callable[[int], np.ndarray], string_counts: np.ndarray, edges: np.ndarray,
                  members: np.ndarray | None = None) -> dict:
    """Compare the search summary of the sampled prompts with the dense float64 brute force, block by block.

    summary_ids, matches ``[P blocks bins]``, counts ``[P blocks bins vocab]``: the search summary
    (:func:`tinylens.core.search.load_summary`); prompt_ids: the prompt table's ids, whose row order
    ``prompt_block(b)`` (``[prompts d_model]``) follows; ``string_block(b)``: ``[strings d_model]``.
    Returns a JSON-able report; ``equal`` is true only if every sampled prompt agrees in every block.
    """
    sample_ids = np.asarray(sample_ids)
    table_rows = rows_of(sample_ids, np.asarray(prompt_ids), "the prompt table")
    summary_rows = rows_of(sample_ids, summary_ids, "the search summary")
    n_blocks = matches.shape[1]
    mismatched: dict[str, list[int]] = {}
    n_strings = 0
    for b in range(n_blocks):
        strings = string_block(b)
        n_strings = len(strings)
        exp_m, exp_c = search_block_bruteforce(prompt_block(b)[table_rows], strings, string_counts, edges, members)
        got_m, got_c = matches[summary_rows, b], counts[summary_rows, b]
        bad = (got_m != exp_m).any(axis=1) | (got_c != exp_c).any(axis=(1, 2))
        if bad.any():
            mismatched[str(b)] = sample_ids[bad].tolist()
    return {
        "prompts": len(prompt_ids), "prompts_checked": len(sample_ids), "checked_ids": sample_ids.tolist(),
        "blocks": n_blocks, "strings": n_strings, "mismatched_prompt_ids": mismatched, "equal": not mismatched,
    }
