"""The final residual as a sum of vectors, and the feed-forward-only endpoint (the "vector addition" section).

At the last position the final residual is ``x_7 = x_1 + sum_b (sa_b + ffwd_b)``
(``x_1`` the embedding). The paper's picture: the feed-forward outputs alone,
``f = x_1 + sum_b ffwd_b``, land close to ``x_7``, and unembedding ``f``
gives nearly the model's distribution. :func:`ffwd_only_endpoint` measures
that on every prompt, beside the attention-only endpoint ``a = x_1 + sum_b sa_b``
(the comparison that gives "closely aligned" a meaning); :func:`tip_to_tail` draws a sequence of vectors in 2-D
to scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from tinylens.interventions import hook_name, run, run_in_batches
from tinylens.measures import cosine, hellinger, softmax
from tinylens.model import Transformer


@torch.no_grad()
def residual_terms(model: Transformer, tokens: Tensor) -> dict[str, Tensor]:
    """Last-position terms of the final residual: ``embed`` ``[batch d_model]``, ``sa_out`` and
    ``ffwd_out`` ``[block batch d_model]``, ``ln_f_input`` ``[batch d_model]`` and ``logits``."""
    model.eval()
    trace = run_in_batches(model, tokens, record=[hook_name(0, "block_input"), "blocks.*.sa_out",
                                                  "blocks.*.ffwd_out", "ln_f_input"], last_only=True)
    return {"embed": trace[hook_name(0, "block_input")], "sa_out": trace.stacked("sa_out"),
            "ffwd_out": trace.stacked("ffwd_out"), "ln_f_input": trace["ln_f_input"], "logits": trace.logits}


@torch.no_grad()
def ffwd_only_endpoint(model: Transformer, tokens: Tensor) -> dict[str, np.ndarray]:
    """Columns of :data:`ENDPOINT_SCHEMA` (less mode and prompt_id), one row per prompt: the feed-forward-only
    endpoint ``f = x_1 + sum_b ffwd_b`` and, beside it, the attention-only one ``a = x_1 + sum_b sa_b``, each
    against the real ``x_7`` (cosine, norm ratio, and H of its distribution from the model's)."""
    terms = residual_terms(model, tokens)
    x7 = terms["ln_f_input"]
    q = softmax(terms["logits"])
    out = {"final_norm": x7.double().norm(dim=-1).numpy()}
    for prefix, kind in (("", "ffwd_out"), ("sa_", "sa_out")):
        end = terms["embed"] + terms[kind].sum(0)
        # Unembedded exactly as the model unembeds x_7: through ln_f and lm_head, from the input of ln_f.
        p_end = softmax(run(model, resid=end[:, None, :], start=model.config.n_layer, last_only=True).logits)
        out |= {f"{prefix}cosine": cosine(end, x7).numpy(),
                f"{prefix}norm_ratio": (end.double().norm(dim=-1) / x7.double().norm(dim=-1)).numpy(),
                f"{prefix}hellinger": hellinger(p_end, q).numpy()}
    return out


def angle_degrees(a: np.ndarray, b: np.ndarray) -> float:
    """The angle between two vectors, in degrees (float64)."""
    return float(np.degrees(np.arccos(np.clip(cosine(np.asarray(a), np.asarray(b)), -1.0, 1.0))))


def tip_to_tail(vectors: np.ndarray) -> np.ndarray:
    """2-D points ``[k+1 2]`` of the running sums of ``vectors`` ``[k d]``, drawn to scale.

    The first vector lies along +x. Each next arrow keeps its true length and its
    true angle to the running sum it starts from, so every drawn running sum has
    its true length (law of cosines), the last one ``|sum of vectors|``. Which
    side an arrow turns to is free in 2-D: it is the side that keeps the drawn
    running sum's angle to the first vector closest to the true angle; the
    drawing is then reflected, if need be, so that the endpoint lies above the
    x axis.
    """
    v = np.asarray(vectors, dtype=np.float64)
    points = np.zeros((len(v) + 1, 2))
    points[1] = [np.linalg.norm(v[0]), 0.0]
    running = v[0].copy()
    for i in range(1, len(v)):
        length = np.linalg.norm(v[i])
        drawn = points[i]
        heading = np.arctan2(drawn[1], drawn[0])  # direction of the drawn running sum
        theta = np.arccos(np.clip(cosine(v[i], running), -1.0, 1.0)) if length > 0 and np.any(running) else 0.0
        running = running + v[i]
        true_to_first = np.arccos(np.clip(cosine(running, v[0]), -1.0, 1.0))
        candidates = [drawn + length * np.array([np.cos(heading + s * theta), np.sin(heading + s * theta)])
                      for s in (1.0, -1.0)]
        errors = [abs(abs(np.arctan2(c[1], c[0])) - true_to_first) for c in candidates]
        points[i + 1] = candidates[int(np.argmin(errors))]
    if points[-1, 1] < 0:  # a reflection keeps every length and angle: endpoints drawn above the x axis
        points[:, 1] = -points[:, 1]
    return points


def vector_sum_paths(model: Transformer, tokens: Tensor, prompts: Sequence[str]) -> list[dict]:
    """Per prompt, the full path (``x_1, sa_1, ffwd_1, ..., ffwd_n``) and the feed-forward-only path
    (``x_1, ffwd_1, ..., ffwd_n``) drawn by :func:`tip_to_tail`, with each arrow's true length and the
    true angle between the two endpoints."""
    terms = {k: v.double().numpy() for k, v in residual_terms(model, tokens).items()}
    n_layer = model.config.n_layer
    out = []
    for i, prompt in enumerate(prompts):
        full_labels, full = ["x_1"], [terms["embed"][i]]
        for b in range(n_layer):
            full_labels += [f"sa_{b + 1}", f"ffwd_{b + 1}"]
            full += [terms["sa_out"][b, i], terms["ffwd_out"][b, i]]
        ffwd_labels = ["x_1", *(f"ffwd_{b + 1}" for b in range(n_layer))]
        ffwd = [terms["embed"][i], *(terms["ffwd_out"][b, i] for b in range(n_layer))]
        x7, f = np.sum(full, axis=0), np.sum(ffwd, axis=0)
        out.append({
            "prompt": prompt,
            "full": {"labels": full_labels, "points": tip_to_tail(np.array(full)).round(6).tolist(),
                     "lengths": [round(float(np.linalg.norm(v)), 6) for v in full]},
            "ffwd_only": {"labels": ffwd_labels, "points": tip_to_tail(np.array(ffwd)).round(6).tolist(),
                          "lengths": [round(float(np.linalg.norm(v)), 6) for v in ffwd]},
            "final_norm": round(float(np.linalg.norm(x7)), 6),
            "ffwd_only_norm": round(float(np.linalg.norm(f)), 6),
            # x_7 from the sum equals the model's recorded ln_f_input up to float32 rounding.
            "endpoint_angle_degrees": round(angle_degrees(x7, f), 4),
            "sum_check": round(float(np.abs(x7 - terms["ln_f_input"][i]).max()), 8),
        })
    return out
