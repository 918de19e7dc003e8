"""Attention against feed-forward output, block by block, over every evaluation prompt (method.md §7).

The paper (source 002) argues from five drawn prompts that in each block the feed-forward output is
longer than the attention output and points the way the block's output does. Here the same
quantities for every evaluation prompt, read from the prompt dumps (last position): per block ``b``
with ``x_b`` its input and ``out_b = x_b + sa_b + ffwd_b`` its output,

- ``norm_ratio = |ffwd_b| / |sa_b|``,
- ``cos_ffwd_sa = cos(ffwd_b, sa_b)``,
- ``cos_ffwd_out = cos(ffwd_b, out_b)`` and ``cos_sa_out = cos(sa_b, out_b)``.

Each claim is one test per block (``tinylens.measures``): "longer" a sign test of the share of prompts
with ``norm_ratio > 1`` against one half (Wilson interval; longer, shorter or no different), "points the
way of the output" the same test of ``cos_ffwd_out > cos_sa_out``, "the two point in roughly the same
direction" the t-test of the mean ``cos_ffwd_sa`` against :data:`ROUGHLY_SAME_DIRECTION` (and, beside it,
against 0). Also the feed-forward share of the parameters (the paper: 65.71%).

No torch here: the job reads dumps and a config, the metrics job only this module's summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tinylens import published
from tinylens.measures import describe, mean_test, share_test

#: "Roughly the same direction" (source 002, of a block's two outputs): a mean cosine above 0.5, an angle
#: under 60 degrees (method.md §7).
ROUGHLY_SAME_DIRECTION = 0.5

#: The columns :func:`block_contributions` returns (less mode and prompt_id), one row per (prompt, block).
COLUMNS = ("block", "sa_norm", "ffwd_norm", "norm_ratio", "cos_ffwd_sa", "cos_ffwd_out", "cos_sa_out")


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine in float64; 0 where a row is zero (no direction to compare)."""
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    den = na * nb
    return np.where(den > 0, np.einsum("nd,nd->n", a, b) / np.where(den > 0, den, 1.0), 0.0)


def block_contributions(block_input: Sequence[np.ndarray], sa: Sequence[np.ndarray],
                        ffwd: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Per block (0-based, the sequences' index) the last-position vectors ``[prompt d_model]``
    -> the :data:`COLUMNS`, rows block-major (all prompts of block 0, then block 1, ...).
    ``norm_ratio`` is ``inf`` where ``sa`` is zero."""
    if not len(block_input) == len(sa) == len(ffwd):
        raise ValueError(f"one array per block expected, got {len(block_input)}, {len(sa)}, {len(ffwd)}")
    cols: dict[str, list] = {k: [] for k in COLUMNS}
    for b, (x, s, f) in enumerate(zip(block_input, sa, ffwd)):
        x, s, f = (np.asarray(v, dtype=np.float64) for v in (x, s, f))
        out = x + s + f
        sn, fn = np.linalg.norm(s, axis=-1), np.linalg.norm(f, axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(sn > 0, fn / np.where(sn > 0, sn, 1.0), np.inf)
        for key, value in (("block", np.full(len(x), b, dtype=np.int8)), ("sa_norm", sn), ("ffwd_norm", fn),
                           ("norm_ratio", ratio), ("cos_ffwd_sa", _cos(f, s)), ("cos_ffwd_out", _cos(f, out)),
                           ("cos_sa_out", _cos(s, out))):
            cols[key].append(value)
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}


def share(condition: np.ndarray) -> dict:
    """The sign test of the share of True against one half (:func:`tinylens.measures.share_test`: the share, its
    Wilson interval, p, and ``direction`` above, below or the same)."""
    condition = np.asarray(condition, dtype=bool)
    return share_test(int(condition.sum()), len(condition))


def summarize_contributions(cols: Mapping[str, np.ndarray], n_blocks: int) -> list[dict]:
    """One entry per block (``block`` 0-based, as everywhere in the metrics): the spread of each quantity over the prompts,
    the two claims' sign tests, and the t-tests of the mean cos(ffwd_b, sa_b) against 0 and against
    :data:`ROUGHLY_SAME_DIRECTION`."""
    block = np.asarray(cols["block"])
    rows = []
    for b in range(n_blocks):
        sel = block == b
        c = {k: np.asarray(cols[k], dtype=np.float64)[sel] for k in COLUMNS if k != "block"}
        finite = np.isfinite(c["norm_ratio"])
        rows.append({
            "block": b,
            "n_prompts": int(sel.sum()),
            "norm_ratio": describe(c["norm_ratio"][finite]),
            "log10_norm_ratio": describe(np.log10(c["norm_ratio"][finite & (c["norm_ratio"] > 0)])),
            **{k: describe(c[k]) for k in ("sa_norm", "ffwd_norm", "cos_ffwd_sa", "cos_ffwd_out", "cos_sa_out")},
            "ffwd_longer": share(c["norm_ratio"] > 1),
            "ffwd_closer_to_output": share(c["cos_ffwd_out"] > c["cos_sa_out"]),
            "cos_ffwd_sa_against_0": mean_test(c["cos_ffwd_sa"], 0.0),
            "cos_ffwd_sa_against_same_direction": mean_test(c["cos_ffwd_sa"], ROUGHLY_SAME_DIRECTION),
        })
    return rows


def ffwd_parameter_share(vocab_size: int, block_size: int, d_model: int, n_layer: int) -> dict:
    """Parameters of the model of method.md §1 (no biases in q, k, v; biased ``proj``, ffwd and
    ``lm_head``; untied embeddings), the feed-forward ones among them, and their share in percent."""
    d = d_model
    ffwd = n_layer * (d * 4 * d + 4 * d + 4 * d * d + d)
    attention = n_layer * (3 * d * d + d * d + d)
    layernorms = (2 * n_layer + 1) * 2 * d
    total = vocab_size * d + block_size * d + attention + ffwd + layernorms + d * vocab_size + vocab_size
    return {"ffwd_parameters": ffwd, "parameters": total, "percent": round(100.0 * ffwd / total, 4)}


def contributions_section(per_mode: Mapping[str, Mapping[str, np.ndarray]], n_blocks: int, model: Mapping) -> dict:
    """The metrics JSON's section: per mode the per-block summary; the parameter share beside the
    paper's. ``model``: the keys of :func:`ffwd_parameter_share` read from the model's config."""
    return {"ffwd_parameter_share": {"ours": ffwd_parameter_share(**model), "paper": published.FFWD_SHARE},
            "modes": {m: summarize_contributions(cols, n_blocks) for m, cols in per_mode.items()}}
