"""The approximation, threshold/weight tuning, and the evaluation (method.md §5-6).

Per prompt: for each block b, the summed next-token counts of the strings
whose similarity exceeds the block's threshold t_b; blocks combined with
weights w_b; normalised to a distribution. :func:`combine` is that one
definition (NumPy or torch, so the weight fit differentiates through the
same function); :func:`approximate` applies it to the search summary's
cumulative counts ``above[prompt block threshold vocab]`` (counts of strings
with cosine > edge_k), where a threshold is an index into the edge grid, and
:mod:`tinylens.core.case_studies` to explicit match lists. Distances are
:func:`tinylens.measures.hellinger`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from tinylens.core.schemas import SWEEP_SCHEMA, hellinger_schema
from tinylens.measures import hellinger, softmax  # noqa: F401  (re-exported: one definition)
from tinylens.tables import align_ids, read_csv, write_csv

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    import torch


def combine(per_block, weights):
    """The approximation from per-block summed next-token counts: weighted sum over blocks, normalised.

    per_block: ``[prompts blocks vocab]`` (NumPy or torch); weights: ``[blocks]``. Returns
    ``(p [prompts vocab], empty [prompts])`` in float64: prompts with no count in any weighted block get
    the uniform distribution (no information) and are flagged in ``empty``.
    """
    import torch
    if isinstance(per_block, torch.Tensor):
        w = weights if isinstance(weights, torch.Tensor) else torch.as_tensor(weights)
        combined = torch.einsum("pbv,b->pv", per_block.double(), w.double().to(per_block.device))
        total = combined.sum(1, keepdim=True)
        empty = total[:, 0] <= 0
        uniform = torch.full_like(combined, 1.0 / combined.shape[1])
        return torch.where(empty[:, None], uniform, combined / torch.where(total > 0, total, 1.0)), empty
    combined = np.einsum("pbv,b->pv", np.asarray(per_block, dtype=np.float64), np.asarray(weights, dtype=np.float64))
    total = combined.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    p = np.where(empty[:, None], 1.0 / combined.shape[1], combined / np.where(total > 0, total, 1.0))
    return p, empty


def select_thresholds(above, thresholds):
    """``above[prompts blocks thresholds vocab]`` at each block's threshold index -> ``[prompts blocks vocab]``."""
    return above[:, np.arange(above.shape[1]), np.asarray(thresholds)]


def approximate(above: np.ndarray, thresholds: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Approximation distributions [prompts vocab] and a mask of prompts with no match in any used block
    (those get the uniform distribution: no information).

    above: [prompts blocks n_thresholds vocab]; thresholds: [blocks] indices; weights: [blocks].
    """
    return combine(select_thresholds(above, thresholds), weights)


@dataclass(frozen=True)
class Tuned:
    thresholds: np.ndarray  # [blocks] indices into the edge grid
    weights: np.ndarray  # [blocks], summing to 1
    mean_hellinger: float  # on the tuning prompts


def _fit_weights(per_block: torch.Tensor, q: torch.Tensor, init: np.ndarray, steps: int) -> np.ndarray:
    """Weights minimising mean Hellinger for fixed thresholds. per_block: [prompts blocks vocab].

    The loss is :func:`combine` and :func:`~tinylens.measures.hellinger`, smoothed (``eps``) so that
    its gradient stays finite where a probability is zero."""
    import torch
    log_w = torch.tensor(np.log(np.maximum(init, 1e-6)), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_w], lr=0.1)
    for _ in range(steps):
        p, _ = combine(per_block, torch.softmax(log_w, 0))
        loss = hellinger(p, q, eps=1e-12).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.softmax(log_w, 0).detach().numpy()


def tune(above: np.ndarray, q: np.ndarray, init_thresholds: np.ndarray, rounds: int = 3,
         weight_steps: int = 150, progress: bool = True) -> Tuned:
    """Coordinate descent: fit the weights (Adam on log-weights), then for each block try every
    threshold with the others fixed and keep the best; repeat ``rounds`` times."""
    import torch
    n_blocks, n_thresholds = above.shape[1], above.shape[2]
    thresholds = np.asarray(init_thresholds, dtype=np.int64).copy()
    weights = np.full(n_blocks, 1.0 / n_blocks)
    q_t = torch.from_numpy(np.asarray(q, dtype=np.float64))

    def per_block(th):  # [prompts blocks vocab] float64: only the chosen thresholds are ever converted
        return torch.from_numpy(np.asarray(select_thresholds(above, th), dtype=np.float64))

    def score(th, w):
        return float(hellinger(approximate(above, th, w)[0], q).mean())

    for _ in tqdm(range(rounds), disable=not progress, desc="tuning", unit="round"):
        weights = _fit_weights(per_block(thresholds), q_t, weights, weight_steps)
        for b in range(n_blocks):
            trial = thresholds.copy()
            scores = []
            for k in range(n_thresholds):
                trial[b] = k
                scores.append(score(trial, weights))
            thresholds[b] = int(np.argmin(scores))
    weights = _fit_weights(per_block(thresholds), q_t, weights, weight_steps)
    return Tuned(thresholds, weights, score(thresholds, weights))


def tune_and_evaluate(above: np.ndarray, q: np.ndarray, splits, init: np.ndarray, rounds: int
                      ) -> tuple[dict, np.ndarray]:
    """Tune thresholds and weights on the tuning prompts (:func:`tune`); return the tuned
    ``{"thresholds": indices, "weights", "tune_mean_hellinger"}`` and the Hellinger distance of every
    evaluation prompt (in their order). above: ``[prompts blocks edges vocab]``, q: ``[prompts vocab]``, splits:
    each prompt's ``tune`` or ``eval``. The approximation's variants and controls are all tuned by this
    (method.md §6b, §7)."""
    masks = split_masks(splits)
    tuned = tune(above[masks["tune"]], q[masks["tune"]], init, rounds=rounds, progress=False)
    p, _ = approximate(above[masks["eval"]], tuned.thresholds, tuned.weights)
    return ({"thresholds": [int(k) for k in tuned.thresholds], "weights": [round(float(w), 6) for w in tuned.weights],
             "tune_mean_hellinger": round(float(tuned.mean_hellinger), 6)},
            hellinger(p, q[masks["eval"]]))


def single_block_sweep(above: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Mean Hellinger of each block alone at each threshold: [blocks n_thresholds]."""
    n_blocks, n_thresholds = above.shape[1], above.shape[2]
    out = np.zeros((n_blocks, n_thresholds))
    for b in range(n_blocks):
        w = np.zeros(n_blocks)
        w[b] = 1.0
        for k in range(n_thresholds):
            th = np.zeros(n_blocks, dtype=np.int64)
            th[b] = k
            out[b, k] = hellinger(approximate(above, th, w)[0], q).mean()
    return out


def grid_index(values: Sequence[float], edges: np.ndarray) -> np.ndarray:
    """Indices of threshold values on the edge grid; a value off the grid is an error.

    The config check (:func:`tinylens.config.validate_config`) refuses such values when the
    workflow loads; this guards library callers."""
    edges = np.asarray(edges, dtype=np.float64)
    idx = np.array([int(np.argmin(np.abs(edges - v))) for v in values], dtype=np.int64)
    off = [v for v, i in zip(values, idx) if abs(edges[i] - v) > 1e-9]
    if off:
        raise ValueError(f"thresholds {off} are not edges of the threshold grid "
                         f"({edges[0]:g}, {edges[1] if len(edges) > 1 else edges[0]:g}, ..., {edges[-1]:g})")
    return idx


SPLITS = ("tune", "eval")


def split_masks(splits) -> dict[str, np.ndarray]:
    splits = np.asarray(splits)
    unknown = sorted(set(splits.tolist()) - set(SPLITS))
    if unknown:
        raise ValueError(f"prompt splits must be {SPLITS}, found {unknown}")
    return {s: splits == s for s in SPLITS}


def paper_setting(baseline: Mapping[str, Sequence[float]], edges: np.ndarray, n_blocks: int
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The paper's hand-tuned (threshold indices, weights), or None when the model has another block count."""
    if len(baseline["thresholds"]) != n_blocks:
        return None
    return grid_index(baseline["thresholds"], edges), np.asarray(baseline["weights"], dtype=np.float64)


def initial_thresholds(baseline: Mapping[str, Sequence[float]], edges: np.ndarray, n_blocks: int) -> np.ndarray:
    """Where the tuning starts: the paper's thresholds (as grid indices), or the grid's middle for a model with
    another block count. Every tuning of the approximation and of its variants starts here."""
    paper = paper_setting(baseline, edges, n_blocks)
    return paper[0] if paper is not None else np.full(n_blocks, len(edges) // 2)


def block_alone_thresholds(sweep: Mapping[str, np.ndarray], edges: np.ndarray, n_blocks: int) -> np.ndarray:
    """Each block's threshold index where it alone approximates the model best on the tuning prompts: the
    argmin of its curve in the single-block sweep (:func:`load_sweep` columns; the lowest such threshold on a
    tie). The jointly tuned thresholds need not be these: a block whose weight is near 0 barely moves the
    joint loss, so its threshold is nearly free (method.md §6b)."""
    block, threshold, h = (np.asarray(sweep[k]) for k in ("block", "threshold", "mean_hellinger"))
    out = np.empty(n_blocks, dtype=np.int64)
    for b in range(n_blocks):
        rows = np.flatnonzero(block == b)
        if len(rows) == 0:
            raise ValueError(f"the threshold sweep has no rows of block {b}; rerun tune_approximation")
        best = rows[np.lexsort((threshold[rows], h[rows]))[0]]
        out[b] = grid_index([threshold[best]], edges)[0]
    return out


def mean_hellinger(above: np.ndarray, q: np.ndarray, thresholds, weights) -> float:
    return round(float(hellinger(approximate(above, thresholds, weights)[0], q).mean()), 6)


def tuning_report(above: np.ndarray, q: np.ndarray, splits, edges: np.ndarray,
                  baseline: Mapping[str, Sequence[float]], rounds: int, mode: str, progress: bool = True
                  ) -> tuple[dict, dict[str, np.ndarray]]:
    """Tune thresholds and weights on the tuning prompts; report them on both splits, beside the paper's values.

    above: ``[prompts blocks thresholds vocab]``, q: ``[prompts vocab]`` (the model), both in the order of
    ``splits``. Returns the ``tuned.json`` content and the single-block sweep (columns of
    :data:`SWEEP_SCHEMA`).
    """
    n_blocks = above.shape[1]
    masks = split_masks(splits)
    paper = paper_setting(baseline, edges, n_blocks)
    init = initial_thresholds(baseline, edges, n_blocks)
    tuned = tune(above[masks["tune"]], q[masks["tune"]], init, rounds=rounds, progress=progress)
    result = {
        "mode": mode,
        "thresholds": [round(float(edges[k]), 4) for k in tuned.thresholds],
        "weights": [round(float(w), 6) for w in tuned.weights],
        "mean_hellinger": {s: mean_hellinger(above[masks[s]], q[masks[s]], tuned.thresholds, tuned.weights)
                           for s in SPLITS},
        "n_prompts": {s: int(m.sum()) for s, m in masks.items()},
    }
    if paper is not None:
        result["paper_values"] = {
            "thresholds": list(baseline["thresholds"]), "weights": list(baseline["weights"]),
            "mean_hellinger": {s: mean_hellinger(above[masks[s]], q[masks[s]], *paper) for s in SPLITS},
        }
    sweep = single_block_sweep(above[masks["tune"]], q[masks["tune"]])  # [blocks thresholds]
    n_thresholds = len(edges)
    columns = {
        "block": np.repeat(np.arange(n_blocks), n_thresholds),
        "threshold": np.tile(np.round(np.asarray(edges, dtype=np.float64), 4), n_blocks),
        "mean_hellinger": np.round(sweep.reshape(-1), 6),
    }
    return result, columns


def save_sweep(path, columns: Mapping[str, np.ndarray]) -> None:
    write_csv(path, SWEEP_SCHEMA, columns)


def load_sweep(path) -> dict[str, np.ndarray]:
    table = read_csv(path, SWEEP_SCHEMA)
    return {k: table[k].to_numpy() for k in SWEEP_SCHEMA.columns}


def summary_for_prompts(paths: Sequence, prompt_ids: Sequence[int], n_blocks: int, n_bins: int, vocab_size: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The search shards' binned ``(matches [P blocks bins], counts [P blocks bins vocab])`` in the order of
    ``prompt_ids`` (the prompt table's), refusing shards whose prompt ids do not line up with it."""
    from tinylens.core.search import load_summary

    ids, matches, counts = load_summary(paths, n_blocks, n_bins, vocab_size)
    rows = align_ids(ids, np.asarray(prompt_ids), f"the search summary of {[str(p) for p in paths]}",
                     "the prompt table")
    if np.array_equal(rows, np.arange(len(ids))):
        return matches, counts  # already in order: no copy (the counts are ~1 GB at paper scale)
    return matches[rows], counts[rows]


def tuned_setting(tuned: Mapping, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(threshold indices, weights) of a ``tuned.json``."""
    return grid_index(tuned["thresholds"], edges), np.asarray(tuned["weights"], dtype=np.float64)


def evaluation_columns(path, alternate_seeds, n_blocks: int, split: str | None = None) -> dict[str, np.ndarray]:
    """The ``hellinger_*`` columns of an evaluation table (``evaluation/<mode>/hellinger.parquet``),
    restricted to the prompts of ``split`` when given."""
    from tinylens.tables import read_table

    table = read_table(path, hellinger_schema(alternate_seeds, n_blocks))
    keep = slice(None) if split is None else split_masks(table["split"].to_numpy(zero_copy_only=False))[split]
    return {k: table[k].to_numpy()[keep] for k in table.column_names if k.startswith("hellinger_")}


def evaluate(above: np.ndarray, above_matches: np.ndarray, q: np.ndarray, q_alternates: dict[int, np.ndarray],
             tuned: tuple[np.ndarray, np.ndarray], paper: tuple[np.ndarray, np.ndarray] | None) -> dict[str, np.ndarray]:
    """Per-prompt distances: approximation (tuned, and the paper's values) vs the model, alternates vs it.

    above: [prompts blocks thresholds vocab]; above_matches: [prompts blocks thresholds]; q: [prompts vocab].
    """
    p, empty = approximate(above, *tuned)
    n = len(q)
    out = {
        "hellinger_approx": hellinger(p, q),
        "hellinger_paper_values": hellinger(approximate(above, *paper)[0], q) if paper else np.full(n, np.nan),
        "no_match": empty,
        "matches": select_thresholds(above_matches, tuned[0]),
    }
    out.update({f"hellinger_seed{s}": hellinger(qa, q) for s, qa in q_alternates.items()})
    return out


def in_train_text(prompts: Sequence[str], strings: Sequence[str], in_train: np.ndarray) -> np.ndarray:
    """Whether each prompt occurs verbatim in the train text, from the string table's ``in_train``.
    A prompt absent from the table (it cannot be: the table holds every string of the text) is an error."""
    index = {s: i for i, s in enumerate(strings)}
    missing = [p for p in prompts if p not in index]
    if missing:
        raise ValueError(f"prompts {missing[:5]} are not in the string table; the tables are from different runs")
    return np.asarray(in_train, dtype=bool)[[index[p] for p in prompts]]
