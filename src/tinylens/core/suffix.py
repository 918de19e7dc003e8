"""The suffix-count baseline (method.md §6b): the approximation with no network.

For a prompt and each k = 1..K, the next-token counts of the strings of the searched text that end in the
prompt's last k characters: every position i of the text whose k characters before it equal the prompt's
last k, counted by the character at i (the text's k-grams with their next characters, the counts an n-gram
model is built from). The K count vectors are combined as the blocks' are (:func:`tinylens.core.approx.combine`:
a weighted sum, normalised), with the weights tuned as the block weights are
(:func:`tinylens.core.approx.tune` with one threshold per "block" k, so only the weights move): a tuned
mixture of n-gram counts, not an interpolated back-off (no discounting, no fall-through to shorter suffixes).

The searched text is the mode's (:data:`tinylens.core.strings.SEARCHED_TEXT`): the train text for the held-out
mode, as the string table's ``next_counts_train`` (a next character inside the train text), the whole text for
the corpus and paper modes, as ``next_counts``. At k = substring_length a prompt's counts are exactly its own
string's next-token counts in the string table.

>>> import numpy as np
>>> text = np.array([0, 1, 0, 1, 2, 0, 1, 0])  # "ababcaba" over a, b, c
>>> suffix_counts(text, np.array([[2, 0, 1]]), 2, 3)[0]  # the prompt "cab": after "b" (k=1), after "ab" (k=2)
array([[2, 0, 1],
       [2, 0, 1]])
"""

from __future__ import annotations

import numpy as np

from tinylens.core.strings import window_keys


def suffix_keys(prompts: np.ndarray, k: int, base: int) -> np.ndarray:
    """One int64 per prompt ``[prompts n]`` for its last ``k`` tokens, as :func:`window_keys` numbers a window."""
    prompts = np.asarray(prompts, dtype=np.int64)
    if not 1 <= k <= prompts.shape[1]:
        raise ValueError(f"a suffix of {k} tokens does not fit prompts of {prompts.shape[1]}")
    keys = np.zeros(len(prompts), dtype=np.int64)
    for j in range(prompts.shape[1] - k, prompts.shape[1]):
        keys = keys * base + prompts[:, j]
    return keys


def suffix_counts(text: np.ndarray, prompts: np.ndarray, max_k: int, vocab_size: int) -> np.ndarray:
    """``[prompts max_k vocab]`` int64: at ``[p, k - 1, t]`` how often the text has the last ``k`` tokens of prompt
    ``p`` followed by token ``t``. ``text``: token ids; ``prompts``: ``[prompts n]`` token ids, n >= max_k.

    Per k, every window of the text is looked up among the prompts' distinct suffixes (a sorted search), so the
    cost is the text's length times log(prompts), whatever the number of distinct k-grams."""
    text = np.asarray(text, dtype=np.int64)
    prompts = np.asarray(prompts, dtype=np.int64)
    out = np.zeros((len(prompts), max_k, vocab_size), dtype=np.int64)
    if len(text) < 2 or len(prompts) == 0:
        return out
    for k in range(1, max_k + 1):
        if len(text) <= k:
            break
        keys = window_keys(text[:-1], k, vocab_size)  # windows followed by a next token: starts 0..len-k-1
        following = text[k:]
        wanted, back = np.unique(suffix_keys(prompts, k, vocab_size), return_inverse=True)
        at = np.minimum(np.searchsorted(wanted, keys), len(wanted) - 1)
        hit = wanted[at] == keys
        counts = np.bincount(at[hit] * vocab_size + following[hit], minlength=len(wanted) * vocab_size)
        out[:, k - 1] = counts.reshape(len(wanted), vocab_size)[back.ravel()]
    return out
