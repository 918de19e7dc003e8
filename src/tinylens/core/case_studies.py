"""Case-study prompts: every matching string with its exact cosine, and the approximation built from them
(method.md §6, 'And only l' and 'hing tremb')."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from tinylens.core.approx import combine
from tinylens.core.corpus import CharTokenizer
from tinylens.interventions import record_activations
from tinylens.measures import cosine_matrix, hellinger, softmax
from tinylens.model import Transformer

#: One block's matches of one prompt: (string indices, cosines), by decreasing cosine.
Matches = tuple[np.ndarray, np.ndarray]


def check_prompts(prompts: Sequence[str], length: int, tokenizer: CharTokenizer) -> None:
    """Case-study prompts must be ``length`` characters of the vocabulary (config key ``case_study_prompts``)."""
    bad = [p for p in prompts if len(p) != length or not set(p) <= set(tokenizer.vocab)]
    if bad:
        raise ValueError(f"config key 'case_study_prompts' has {bad}: each must be {length} characters "
                         f"('substring_length') from the corpus' vocabulary")


@torch.no_grad()
def prompt_activations(model: Transformer, tokenizer: CharTokenizer, prompts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(ffwd_out [blocks prompts d_model], model distribution [prompts vocab]) at the last position.

    One forward pass per prompt on one thread: a prompt's numbers never depend on which prompts share its
    batch nor on the caller's threads (float32 kernels sum in an order that depends on both), so
    ``tinylens explain`` of one prompt gives exactly the case-study numbers."""
    model.eval()
    vectors, distributions = [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for prompt in prompts:
            ids = torch.from_numpy(tokenizer.encode(prompt).astype(np.int64))[None]  # [1 pos]
            logits, acts = record_activations(model, ids, positions="last", patterns=False)
            vectors.append(acts["ffwd_out"].double().numpy())  # [blocks 1 d_model]
            distributions.append(softmax(logits).numpy())  # [1 vocab]
    finally:
        torch.set_num_threads(threads)
    return np.concatenate(vectors, axis=1), np.concatenate(distributions)


def find_matches(prompt_vectors: np.ndarray, string_blocks: Callable[[int], np.ndarray], min_cosine: float,
                 chunk: int = 65536) -> list[list[Matches]]:
    """For each block and prompt, (string indices, cosines) with cosine > min_cosine, by decreasing cosine.

    Cosines are :func:`tinylens.measures.cosine_matrix`, over chunks of strings so memory stays bounded."""
    out = []
    for b in range(prompt_vectors.shape[0]):
        strings = string_blocks(b)
        found: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(prompt_vectors.shape[1])]
        for s0 in range(0, len(strings), chunk):
            cos = cosine_matrix(prompt_vectors[b], strings[s0 : s0 + chunk])  # [prompts chunk]
            for i, row in enumerate(cos):
                idx = np.nonzero(row > min_cosine)[0]
                found[i].append((idx + s0, row[idx]))
        per_prompt = []
        for parts in found:
            idx = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
            cos = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
            order = np.argsort(-cos, kind="stable")
            per_prompt.append((idx[order], cos[order]))
        out.append(per_prompt)
    return out


def approximation(matches_per_block: Sequence[Matches], counts: np.ndarray, thresholds: Sequence[float],
                  weights: Sequence[float]) -> tuple[np.ndarray, list[int]]:
    """Distribution from the strings above each block's threshold (:func:`tinylens.core.approx.combine`);
    and the number of those strings per block."""
    chosen = [idx[cos > t] for (idx, cos), t in zip(matches_per_block, thresholds, strict=True)]
    per_block = np.stack([counts[c].sum(axis=0, dtype=np.float64) for c in chosen])  # [blocks vocab]
    p, _ = combine(per_block[None], np.asarray(weights, dtype=np.float64))
    return p[0], [len(c) for c in chosen]


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


def match_rows(prompts: Sequence[str], matches: Sequence[Sequence[Matches]], strings: Sequence[str]) -> dict:
    """Columns of :data:`MATCHES_SCHEMA`: one row per (prompt, block, matching string)."""
    rows = [(prompt, b, strings[j], c) for i, prompt in enumerate(prompts)
            for b in range(len(matches)) for j, c in zip(*matches[b][i])]
    return {"prompt": [r[0] for r in rows], "block": np.array([r[1] for r in rows], dtype=np.int8),
            "string": [r[2] for r in rows], "cosine": np.array([r[3] for r in rows], dtype=np.float64)}
