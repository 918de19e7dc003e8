"""The approximation, the Hellinger distance, and threshold/weight tuning (method.md §5-6).

Per prompt: for each block b, the summed next-token counts of the strings
whose similarity exceeds the block's threshold t_b; blocks combined with
weights w_b; normalised to a distribution. Inputs are the search summary's
cumulative counts ``above[prompt block threshold vocab]`` (counts of strings
with cosine > edge_k), so a threshold is an index into the edge grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from tinylens.measures import hellinger, softmax  # noqa: F401  (re-exported: one definition)


def approximate(above: np.ndarray, thresholds: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Approximation distributions [prompts vocab] and a mask of prompts with no match in any used block
    (those get the uniform distribution: no information).

    above: [prompts blocks n_thresholds vocab]; thresholds: [blocks] indices; weights: [blocks].
    """
    per_block = above[:, np.arange(above.shape[1]), thresholds]  # [prompts blocks vocab]
    combined = np.einsum("pbv,b->pv", per_block.astype(np.float64), np.asarray(weights, dtype=np.float64))
    total = combined.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    vocab = above.shape[-1]
    p = np.where(empty[:, None], 1.0 / vocab, combined / np.where(total > 0, total, 1.0))
    return p, empty


@dataclass(frozen=True)
class Tuned:
    thresholds: np.ndarray  # [blocks] indices into the edge grid
    weights: np.ndarray  # [blocks], summing to 1
    mean_hellinger: float  # on the tuning prompts


def _fit_weights(per_block: torch.Tensor, q_sqrt: torch.Tensor, init: np.ndarray, steps: int) -> np.ndarray:
    """Weights minimising mean Hellinger for fixed thresholds. per_block: [prompts blocks vocab]."""
    log_w = torch.tensor(np.log(np.maximum(init, 1e-6)), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_w], lr=0.1)
    for _ in range(steps):
        w = torch.softmax(log_w, 0)
        combined = torch.einsum("pbv,b->pv", per_block, w)
        total = combined.sum(1, keepdim=True)
        p = torch.where(total > 0, combined / total.clamp_min(1e-300), torch.full_like(combined, 1 / combined.shape[1]))
        h = torch.sqrt((0.5 * (torch.sqrt(p + 1e-12) - q_sqrt) ** 2).sum(1).clamp(1e-12, 1.0))
        loss = h.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.softmax(log_w, 0).detach().numpy()


def tune(above: np.ndarray, q: np.ndarray, init_thresholds: np.ndarray, rounds: int = 3,
         weight_steps: int = 150, progress: bool = True) -> Tuned:
    """Coordinate descent: fit the weights (Adam on log-weights), then for each block try every
    threshold with the others fixed and keep the best; repeat ``rounds`` times."""
    n_blocks, n_thresholds = above.shape[1], above.shape[2]
    thresholds = np.asarray(init_thresholds, dtype=np.int64).copy()
    weights = np.full(n_blocks, 1.0 / n_blocks)
    q_sqrt = torch.from_numpy(np.sqrt(q))

    def per_block(th):  # [prompts blocks vocab] float64: only the chosen thresholds are ever converted
        return torch.from_numpy(above[:, np.arange(n_blocks), th].astype(np.float64))

    def score(th, w):
        return float(hellinger(approximate(above, th, w)[0], q).mean())

    for _ in tqdm(range(rounds), disable=not progress, desc="tuning", unit="round"):
        weights = _fit_weights(per_block(thresholds), q_sqrt, weights, weight_steps)
        for b in range(n_blocks):
            trial = thresholds.copy()
            scores = []
            for k in range(n_thresholds):
                trial[b] = k
                scores.append(score(trial, weights))
            thresholds[b] = int(np.argmin(scores))
    weights = _fit_weights(per_block(thresholds), q_sqrt, weights, weight_steps)
    return Tuned(thresholds, weights, score(thresholds, weights))


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


def describe(values: np.ndarray) -> dict[str, float]:
    """Mean, std, min, max and quartiles, rounded for JSON."""
    v = np.asarray(values, dtype=np.float64)
    q25, q50, q75 = np.percentile(v, [25, 50, 75])
    stats = {"mean": v.mean(), "std": v.std(), "min": v.min(), "max": v.max(), "q25": q25, "median": q50, "q75": q75}
    return {**{k: round(float(x), 6) for k, x in stats.items()}, "n": len(v)}


def grid_index(values, edges: np.ndarray) -> np.ndarray:
    """Indices of threshold values on the edge grid; a value off the grid is an error."""
    edges = np.asarray(edges, dtype=np.float64)
    idx = np.array([int(np.argmin(np.abs(edges - v))) for v in values])
    off = [v for v, i in zip(values, idx) if abs(edges[i] - v) > 1e-9]
    if off:
        raise ValueError(f"thresholds {off} are not on the threshold grid {edges.min():.2f}..{edges.max():.2f}")
    return idx


def split_masks(splits) -> dict[str, np.ndarray]:
    splits = np.asarray(splits)
    return {"tune": splits == "tune", "eval": splits == "eval"}


def hellinger_schema(alternate_seeds, n_blocks: int):
    import pyarrow as pa

    from tinylens.tables import Schema

    columns = {
        "prompt_id": pa.int32(),
        "string": pa.string(),
        "split": pa.string(),
        "hellinger_approx": pa.float64(),  # tuned approximation vs the original model
        "hellinger_paper_values": pa.float64(),  # the paper's hand-tuned values vs the model (NaN if n_layer != 6)
        "no_match": pa.bool_(),  # no string above threshold in any block: the approximation is uniform
        "matches": pa.list_(pa.uint32(), n_blocks),  # strings above each block's tuned threshold
    }
    columns.update({f"hellinger_seed{s}": pa.float64() for s in alternate_seeds})  # alternate vs original
    return Schema("hellinger", columns)


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
        "matches": above_matches[:, np.arange(above.shape[1]), tuned[0]],
    }
    out.update({f"hellinger_seed{s}": hellinger(qa, q) for s, qa in q_alternates.items()})
    return out


#: Published numbers to compare with (method.md §6), for the side-by-side summary.
PAPER_REFERENCE = {
    "approximation_mean": 0.1677, "approximation_std": 0.1215,
    "alternates_mean": {"1442": 0.1064, "88": 0.1057, "99999": 0.1053},
}


def headline(per_mode: dict[str, dict], training: dict) -> dict[str, float]:
    """The few numbers `dvc metrics show` prints: Hellinger means per mode and the validation losses."""
    return {**side_by_side(per_mode)["headline"], "val_loss_original": training["val_loss_original"],
            "val_loss_mean": training["val_loss_mean"]}


def side_by_side(per_mode: dict[str, dict]) -> dict:
    """The headline numbers of every mode in one flat table, plus the per-mode details."""
    headline = {}
    for mode, s in per_mode.items():
        headline[f"{mode}_approximation_mean"] = s["approximation"]["mean"]
        headline[f"{mode}_approximation_std"] = s["approximation"]["std"]
        if "paper_values" in s:
            headline[f"{mode}_paper_values_mean"] = s["paper_values"]["mean"]
        alternates = [v["mean"] for v in s["alternates"].values()]
        if alternates:
            headline[f"{mode}_alternates_mean"] = round(float(np.mean(alternates)), 6)
    return {"headline": headline, "paper": PAPER_REFERENCE, "modes": per_mode}
