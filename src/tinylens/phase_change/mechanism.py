"""The mechanism behind the scores (method.md §8b): a previous-token head, its K-composition with the
induction head, and what zeroing a head does to the second copy.

- :func:`previous_token_scores`: TransformerLens's previous-token detection score ("mul": the attention
  mass on key i - 1 over all of a sequence's queries) per sequence and head;
- :func:`composition_rows`: the K-composition score of every (earlier head, later head) pair, the
  circuits family's definition (method.md §9: residual basis, LayerNorm gains folded into the reading
  matrices), with its baseline: the same score for random heads drawn as the model's initialisation;
- :func:`ablation_rows`: per head, the second copy's loss with that head's output zeroed minus without,
  per probe sequence (mean and standard error per probe period).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tinylens.circuits.composition import (
    CircuitWeights,
    baselines,
    basis_of,
    composition_scores,
    head_factors,
    random_heads,
)
from tinylens.measures import standard_error
from tinylens.phase_change.model import AttentionOnly

#: The circuits family's basis and LayerNorm treatment used here (method.md §9).
BASIS, LAYERNORM = "residual", "folded"


def previous_token_scores(pattern: Tensor) -> Tensor:
    """sum(A * D) / sum(A) with D[i, i - 1] = 1, per sequence and head: pattern ``[batch heads pos pos]``
    -> ``[batch heads]`` (:func:`tinylens.dynamics.heads.detection_score` before its mean over sequences)."""
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / pattern.sum((-1, -2))


def circuit_weights(model: AttentionOnly) -> CircuitWeights:
    """The weights composition reads (row-vector convention): W_E, W_U, every layer's heads and the gains of
    the LayerNorms they and ``lm_head`` read through."""
    return CircuitWeights(model.tok_emb.weight.detach(), model.lm_head.weight.detach().T, tuple(model.head_weights()),
                          tuple(ln.weight.detach() for ln in model.ln), model.ln_f.weight.detach())


def random_pairs(model: AttentionOnly, samples: int, seed: int) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """``samples`` random earlier and later heads of the model's shape, drawn as its init (std 0.02)."""
    gen = torch.Generator().manual_seed(seed)
    d, dh = model.cfg.d_model, model.cfg.d_head
    return random_heads(samples, d, dh, gen), random_heads(samples, d, dh, gen)


def composition_rows(model: AttentionOnly, pairs: tuple[tuple[Tensor, ...], tuple[Tensor, ...]]) -> list[dict]:
    """The K-composition score of every pair of heads in an earlier and a later layer, with the baseline's
    mean and std for that layer pair (``pairs``: :func:`random_pairs`, the same draws at every checkpoint)."""
    weights = circuit_weights(model)
    basis = basis_of(weights, BASIS, LAYERNORM)
    f = head_factors(weights, basis)
    scores = composition_scores(f, "K").numpy()
    base = baselines(basis, *pairs, kinds=("K",))["K"]
    rows = []
    for a in range(len(f.layer)):
        for b in range(len(f.layer)):
            la, lb = int(f.layer[a]), int(f.layer[b])
            if lb > la:
                rows.append(dict(layer_a=la, head_a=int(f.head[a]), layer_b=lb, head_b=int(f.head[b]),
                                 k_composition=float(scores[a, b]), baseline_mean=float(base[la, lb, 0]),
                                 baseline_std=float(base[la, lb, 1])))
    return rows


def second_copy_loss(model: AttentionOnly, sequences: Tensor, period: int,
                     ablate: tuple[int, int] | None = None) -> Tensor:
    """Per sequence ``[sequences context+1]`` repeated at ``period``: the mean loss over the second copy's
    targets (tokens period+1 .. 2 period-1, predictable by induction), ``[sequences]``."""
    logits, _, _ = model(sequences[:, :-1], ablate=ablate)
    loss = F.cross_entropy(logits.transpose(1, 2), sequences[:, 1:], reduction="none").double()
    return loss[:, period : 2 * period - 1].mean(1)


@torch.no_grad()
def ablation_rows(model: AttentionOnly, repeated: dict[int, np.ndarray]) -> list[dict]:
    """Per head and probe period: the second copy's loss with the head's output zeroed minus without,
    mean over the probe sequences (``ablation_raise``) and its standard error (paired per sequence)."""
    rows = []
    for p, seqs in repeated.items():
        s = torch.from_numpy(seqs)
        intact = second_copy_loss(model, s, p)
        for layer in range(model.cfg.n_layer):
            for head in range(model.cfg.n_head):
                raised = (second_copy_loss(model, s, p, ablate=(layer, head)) - intact).numpy()
                rows.append(dict(layer=layer, head=head, period=int(p), ablation_raise=float(raised.mean()),
                                 ablation_raise_se=standard_error(raised)))
    return rows
