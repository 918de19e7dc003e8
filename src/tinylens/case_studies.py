"""Case-study prompts: every matching string with its exact cosine, and the approximation built from them
(method.md §6, 'And only l' and 'hing tremb')."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

from tinylens.approx import hellinger
from tinylens.corpus import CharTokenizer
from tinylens.model import Transformer
from tinylens.tables import Schema

MATCHES_SCHEMA = Schema("case-study matches", {
    "prompt": pa.string(),
    "block": pa.int8(),
    "string": pa.string(),
    "cosine": pa.float64(),  # exact float64 cosine of the two ffwd_out vectors
})


@torch.no_grad()
def prompt_activations(model: Transformer, tokenizer: CharTokenizer, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ffwd_out [blocks prompts d_model], model distribution [prompts vocab]) at the last position."""
    model.eval()
    ids = torch.from_numpy(tokenizer.encode("".join(prompts)).reshape(len(prompts), -1).astype(np.int64))
    logits, acts = model.forward_with_activations(ids, positions="last", patterns=False)
    return acts["ffwd_out"].double().numpy(), torch.softmax(logits.double(), -1).numpy()


def find_matches(prompt_vectors: np.ndarray, string_blocks: Callable[[int], np.ndarray], min_cosine: float
                 ) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """For each block and prompt, (string indices, cosines) with cosine > min_cosine, by decreasing cosine.

    The cosines are exact float64 ones; only the strings a float32 screen cannot rule out (within its
    rounding margin of ``min_cosine``) are recomputed in float64, so no float64 copy of a block is made.
    """
    from tinylens.search import _norms, exact_float32_matmul, rounding_margin

    out = []
    for b in range(prompt_vectors.shape[0]):
        strings = np.ascontiguousarray(string_blocks(b), dtype=np.float32)
        prompts = prompt_vectors[b]  # [prompts d_model] float64
        with exact_float32_matmul():  # [strings prompts]
            dots = (torch.from_numpy(strings) @ torch.from_numpy(prompts.astype(np.float32)).T).numpy()
        screen = dots / np.maximum(np.outer(_norms(strings), np.linalg.norm(prompts, axis=1)), 1e-300)
        per_prompt = []
        for i, p in enumerate(prompts):
            idx = np.nonzero(screen[:, i] > min_cosine - rounding_margin(strings.shape[1]))[0]
            exact = strings[idx].astype(np.float64)
            cos = (exact @ p) / np.maximum(np.linalg.norm(exact, axis=1) * np.linalg.norm(p), 1e-300)
            keep = cos > min_cosine
            idx, cos = idx[keep], cos[keep]
            order = np.argsort(-cos, kind="stable")
            per_prompt.append((idx[order], cos[order]))
        out.append(per_prompt)
    return out


def approximation(matches_per_block, counts: np.ndarray, thresholds: Sequence[float], weights: Sequence[float]) -> tuple[np.ndarray, list[int]]:
    """Distribution from the strings above each block's threshold, weighted; and the match counts."""
    combined = np.zeros(counts.shape[1])
    n = []
    for (idx, cos), t, w in zip(matches_per_block, thresholds, weights, strict=True):
        chosen = idx[cos > t]
        n.append(len(chosen))
        combined += w * counts[chosen].sum(axis=0)
    total = combined.sum()
    return (combined / total if total > 0 else np.full(len(combined), 1 / len(combined))), n


def summarize(prompt: str, q: np.ndarray, matches_per_block, strings: Sequence[str], counts: np.ndarray,
              tuned: dict, paper: dict | None, block0_thresholds=(0.90, 0.95, 0.97), examples: int = 8) -> dict:
    """What the paper reports for a case study, computed for our model."""
    n_blocks = len(matches_per_block)
    p_tuned, n_tuned = approximation(matches_per_block, counts, tuned["thresholds"], tuned["weights"])
    result = {
        "prompt": prompt,
        "model": q.round(6).tolist(),
        "tuned": {"distribution": p_tuned.round(6).tolist(), "matches": n_tuned,
                  "hellinger": round(float(hellinger(p_tuned, q)), 6)},
        "block0_only": {},
        "examples": [[strings[i] for i, c in zip(*m) if c > t][:examples]
                     for m, t in zip(matches_per_block, tuned["thresholds"])],
    }
    for t in block0_thresholds:
        one_hot = [1.0] + [0.0] * (n_blocks - 1)
        p, n = approximation(matches_per_block, counts, [t] * n_blocks, one_hot)
        result["block0_only"][f"{t:.2f}"] = {"matches": n[0], "hellinger": round(float(hellinger(p, q)), 6)}
    if paper is not None:
        p, n = approximation(matches_per_block, counts, paper["thresholds"], paper["weights"])
        result["paper_values"] = {"matches": n, "hellinger": round(float(hellinger(p, q)), 6)}
    return result
