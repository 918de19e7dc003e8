"""Q-, K- and V-composition between attention heads, from the weights alone (method.md §9).

Row-vector convention, as TransformerLens: head ``h`` of block ``l`` reads the residual stream
through ``W_Q, W_K, W_V`` ``[d_model d_head]`` and writes through ``W_O`` ``[d_head d_model]``
(:func:`tinylens.interventions.head_weights`); ``W_OV = W_V W_O`` and ``W_QK = W_Q W_K^T``.
For an earlier head A (block ``l``) and a later head B (block ``l' > l``) the composition score
of ``L = W_OV^A`` with ``R`` is::

    score = ||L R||_F / (||L||_F ||R||_F),   R = W_QK^B (Q),  (W_QK^B)^T (K),  W_OV^B (V)

It is 1 when ``L`` is rank one and writes exactly into what ``R`` reads, 0 when they are
orthogonal.

**Bases.** Every head is kept as a pair of factors (never the ``d_model x d_model`` product):
``W_OV = ov_in @ ov_out`` and ``W_QK = q @ k^T``. A *read map* turns the residual stream into what
a head's reading matrices see, an *out matrix* turns what ``W_O`` writes into the coordinates the
next head reads in:

- ``residual`` basis: read map and out matrix are the identity (the products above).
- ``token`` basis: every head is a token-to-token matrix, and the composition formula is applied
  to those. The exact products (``W_E`` = token embedding ``[vocab d_model]``, ``W_U`` =
  ``lm_head`` weight transposed ``[d_model vocab]``)::

      L_tok = W_E W_OV^A W_U                      (A's OV circuit: input token -> output logits)
      Q:  R_tok = W_E W_QK^B W_E^T                (B's QK circuit: query token x key token)
      K:  R_tok = (W_E W_QK^B W_E^T)^T
      V:  R_tok = W_E W_OV^B W_U                  (B's OV circuit)

  i.e. ``L_tok = (W_E W_OV^A) W_U``: A's output is read in token coordinates through ``W_U`` and
  B reads token coordinates through ``W_E`` (the residual stream expressed in the token basis).
  Every factor is a product that an invertible change of residual basis ``T`` (``W_E -> W_E T``,
  ``W_QK -> T^-1 W_QK T^-T``, ``W_OV -> T^-1 W_OV T``, ``W_U -> T^-1 W_U``) leaves unchanged,
  so token-basis scores cannot move under any ``T`` (:mod:`tinylens.circuits.symmetry` checks it).

**LayerNorm.** ``ignored``: the raw weights. ``folded``: every reading matrix is preceded by the
linear part of the LayerNorm it reads through, ``W -> P diag(g) W`` with ``P = I - 11^T/d`` (the
centring) and ``g`` that LayerNorm's gain; the data-dependent ``1/std`` and the bias (a constant
query/key/value offset) are left out. This is what TransformerLens's ``fold_ln`` does to the
reading weights. Heads read through their block's ``ln1``; ``W_U`` reads through ``ln_f``.
Writing matrices (``W_O``, ``W_E``) are not changed.

All arithmetic is float64. Products are never formed at ``d_model x d_model``: with QR factors
of the outer matrices (``W_V = Q_V R_V``, ``W_K = Q_K R_K``, ...) ``||L R||_F = ||R_V W_O W_Q R_K^T||_F``,
a ``d_head x d_head`` matrix per pair, and all pairs of one earlier layer are one matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from tinylens.circuits.schemas import BASES, KINDS, LAYERNORMS, SCORES_SCHEMA, pair_label  # noqa: F401 (re-exported)
from tinylens.interventions import head_weights
from tinylens.model import Transformer

#: Std of the model's own initialisation (``normal(0, 0.02)``, method.md §1): the baseline's matrices.
INIT_STD = 0.02


@dataclass(frozen=True)
class ReadMap:
    """What a reading matrix ``W`` ``[d_model k]`` becomes: ``embed @ P diag(gain) W``.

    ``gain`` is None when LayerNorm is ignored (then no centring either); ``embed`` is ``W_E``
    ``[vocab d_model]`` in the token basis, None in the residual basis.
    """

    embed: Tensor | None = None
    gain: Tensor | None = None

    def __call__(self, w: Tensor) -> Tensor:
        """w: ``[... d_model k]`` -> ``[... n_in k]`` (n_in = vocab in the token basis, else d_model)."""
        if self.gain is not None:
            w = self.gain[:, None] * w
            w = w - w.mean(dim=-2, keepdim=True)  # P (diag(g) W): P is symmetric, so it centres W's rows
        if self.embed is not None:  # embed @ w as one matrix product over the stacked columns of w
            *lead, d, k = w.shape
            w = (w.transpose(-1, -2).reshape(-1, d) @ self.embed.T).reshape(*lead, k, -1).transpose(-1, -2)
        return w


@dataclass(frozen=True)
class CircuitWeights:
    """The weights composition reads, of any transformer (ours: :func:`circuit_weights`; a TransformerLens
    model: :func:`tinylens.external.bridge.circuit_weights`). Row-vector convention.

    W_E ``[vocab d_model]``, W_U ``[d_model vocab]``; per block: its heads' (W_Q, W_K, W_V
    ``[n_heads d_model d_head]``, W_O ``[n_heads d_head d_model]``) and the gain of the LayerNorm they
    read through (``ln1``) ``[d_model]``; the gain of the final LayerNorm ``[d_model]``.
    """

    W_E: Tensor
    W_U: Tensor
    heads: tuple[tuple[Tensor, Tensor, Tensor, Tensor], ...]
    ln1_gains: tuple[Tensor, ...]
    ln_f_gain: Tensor

    @property
    def n_layer(self) -> int:
        return len(self.heads)

    @property
    def n_head(self) -> int:
        return self.heads[0][0].shape[0]

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]

    @property
    def d_head(self) -> int:
        return self.heads[0][0].shape[2]


def circuit_weights(model: Transformer | CircuitWeights) -> CircuitWeights:
    """The :class:`CircuitWeights` of our model (detached; a :class:`CircuitWeights` is returned as it is)."""
    if isinstance(model, CircuitWeights):
        return model
    heads = tuple((w.W_Q, w.W_K, w.W_V, w.W_O) for w in (head_weights(model, b) for b in range(model.config.n_layer)))
    return CircuitWeights(model.tok_emb.weight.detach(), model.lm_head.weight.detach().T, heads,
                          tuple(blk.ln1.weight.detach() for blk in model.blocks), model.ln_f.weight.detach())


@dataclass(frozen=True)
class Basis:
    """How every head is seen: one :class:`ReadMap` per block and the out matrix of ``W_O``."""

    name: str                 # residual | token
    layernorm: str            # ignored | folded
    read: tuple[ReadMap, ...]  # per block: what its heads' W_Q, W_K, W_V read through
    out: Tensor | None        # [d_model n_out]: W_U (through ln_f when folded) in the token basis; None = identity


def basis_of(model: Transformer | CircuitWeights, basis: str, layernorm: str) -> Basis:
    """The read maps and out matrix of ``model`` in ``basis`` with LayerNorm ``layernorm`` (float64)."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {BASES}, not {basis!r}")
    if layernorm not in LAYERNORMS:
        raise ValueError(f"layernorm must be one of {LAYERNORMS}, not {layernorm!r}")
    f64 = torch.float64
    folded = layernorm == "folded"
    w = circuit_weights(model)
    embed = w.W_E.to(f64) if basis == "token" else None
    read = tuple(ReadMap(embed, gain.to(f64) if folded else None) for gain in w.ln1_gains)
    out = None
    if basis == "token":
        w_u = w.W_U.to(f64)  # [d_model vocab]
        out = ReadMap(None, w.ln_f_gain.to(f64) if folded else None)(w_u)
    return Basis(basis, layernorm, read, out)


@dataclass(frozen=True)
class HeadFactors:
    """Every head's circuits as factors, heads stacked in (layer, head) order.

    ``W_OV = ov_in @ ov_out`` and ``W_QK = q @ k^T`` in the chosen basis:
    ov_in, q, k: ``[heads n_in d_head]``; ov_out: ``[heads d_head n_out]``; layer, head: ``[heads]``.
    """

    ov_in: Tensor
    ov_out: Tensor
    q: Tensor
    k: Tensor
    layer: np.ndarray
    head: np.ndarray


def factors(w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, read: ReadMap, out: Tensor | None) -> tuple:
    """``(ov_in, ov_out, q, k)`` of heads with weights ``[... d_model d_head]`` (W_O: ``[... d_head d_model]``)."""
    w_o = w_o if out is None else w_o @ out
    return read(w_v), w_o, read(w_q), read(w_k)


def head_factors(model: Transformer | CircuitWeights, basis: Basis) -> HeadFactors:
    """All heads of ``model`` as factors in ``basis`` (float64)."""
    parts, layers, heads = [], [], []
    w = circuit_weights(model)
    for b, block_heads in enumerate(w.heads):
        f64 = [t.to(torch.float64) for t in block_heads]
        parts.append(factors(*f64, basis.read[b], basis.out))
        layers += [b] * w.n_head
        heads += list(range(w.n_head))
    ov_in, ov_out, q, k = (torch.cat([p[i] for p in parts]) for i in range(4))
    return HeadFactors(ov_in, ov_out, q, k, np.array(layers), np.array(heads))


def _right(kind: str, q: Tensor, k: Tensor, ov_in: Tensor, ov_out: Tensor) -> tuple[Tensor, Tensor]:
    """``R = R1 @ R2`` of the later head: W_QK (Q), W_QK^T (K), W_OV (V)."""
    if kind == "Q":
        return q, k.transpose(-1, -2)
    if kind == "K":
        return k, q.transpose(-1, -2)
    if kind == "V":
        return ov_in, ov_out
    raise ValueError(f"composition kind must be one of {KINDS}, not {kind!r}")


def _left(l1: Tensor, l2: Tensor) -> Tensor:
    """``X = R_1 l2`` ``[... h m]`` with ``l1 = Q_1 R_1`` (QR): ``||l1 A|| = ||R_1 A||`` for any ``A``,
    so ``||L R|| = ||X r1 r2||`` and ``||L|| = ||X||`` without forming ``L = l1 l2``."""
    return torch.linalg.qr(l1, mode="r").R @ l2


def _right_factor(kind: str, q: Tensor, k: Tensor, ov_in: Tensor, ov_out: Tensor) -> Tensor:
    """``Y = r1 R_2^T`` ``[... m k]`` with ``r2^T = Q_2 R_2``: ``||A r1 r2|| = ||A Y||`` for any ``A``."""
    r1, r2 = _right(kind, q, k, ov_in, ov_out)
    return r1 @ torch.linalg.qr(r2.transpose(-1, -2), mode="r").R.transpose(-1, -2)


def _scores(x: Tensor, y: Tensor) -> Tensor:
    """Matched scores ``||X_i Y_i|| / (||X_i|| ||Y_i||)``: x ``[s h m]``, y ``[s m k]`` -> ``[s]``."""
    num = (x @ y).square().sum((-1, -2))
    return torch.sqrt(num / (x.square().sum((-1, -2)) * y.square().sum((-1, -2))))


def composition_scores(f: HeadFactors, kind: str) -> Tensor:
    """Score of every head pair ``[heads(A) heads(B)]``; NaN unless B's layer is after A's.

    One matrix product per earlier layer: ``[heads_A*d_head m] @ [m later_heads*d_head]``.
    """
    x = _left(f.ov_in, f.ov_out)                          # [H h m]
    y = _right_factor(kind, f.q, f.k, f.ov_in, f.ov_out)  # [H m k]
    n, h, m = x.shape
    k = y.shape[-1]
    norm_x, norm_y = x.square().sum((-1, -2)), y.square().sum((-1, -2))
    scores = torch.full((n, n), float("nan"), dtype=x.dtype)
    for layer in np.unique(f.layer):
        a = np.nonzero(f.layer == layer)[0]
        b = np.nonzero(f.layer > layer)[0]
        if len(b) == 0:
            continue
        prod = x[a].reshape(-1, m) @ y[b].permute(1, 0, 2).reshape(m, -1)  # [(a h) (b k)]
        num = prod.reshape(len(a), h, len(b), k).square().sum((1, 3))
        scores[np.ix_(a, b)] = torch.sqrt(num / (norm_x[a, None] * norm_y[None, b]))
    return scores


def random_heads(samples: int, d_model: int, d_head: int, generator: torch.Generator,
                 std: float = INIT_STD) -> tuple[Tensor, ...]:
    """``samples`` random heads drawn as the model's init: W_Q, W_K, W_V ``[s d_model d_head]``, W_O ``[s d_head d_model]``."""
    def draw(*shape):
        return torch.randn(samples, *shape, generator=generator, dtype=torch.float64) * std
    return draw(d_model, d_head), draw(d_model, d_head), draw(d_model, d_head), draw(d_head, d_model)


def baselines(basis: Basis, heads_a: tuple[Tensor, ...], heads_b: tuple[Tensor, ...],
              kinds: Sequence[str] = KINDS) -> dict[str, np.ndarray]:
    """Mean and std of each score for random heads: ``{kind: [n_layer n_layer 2]}`` (mean, std per
    layer pair ``(l_A, l_B)``, NaN unless ``l_B > l_A``), over matched pairs of the random heads
    ``heads_a`` and ``heads_b`` (:func:`random_heads`).

    The heads' own matrices are random (the model's init), everything the basis adds (``W_E``,
    ``W_U``, LayerNorm gains) is the model's. The same draws serve every layer pair, so baselines
    of different layer pairs differ only by what the basis adds there; with LayerNorm ignored
    every block reads through the same map and one layer pair stands for all.
    """
    n_layer = len(basis.read)
    layers = range(n_layer) if basis.layernorm == "folded" else [0]
    left = {la: _left(*factors(*heads_a, basis.read[la], basis.out)[:2]) for la in layers}
    right = {}
    for lb in layers:
        fb = factors(*heads_b, basis.read[lb], basis.out)
        right[lb] = {kind: _right_factor(kind, fb[2], fb[3], fb[0], fb[1]) for kind in kinds}
    out = {k: np.full((n_layer, n_layer, 2), np.nan) for k in kinds}
    stats: dict[tuple, tuple[float, float]] = {}
    for la in range(n_layer):
        for lb in range(la + 1, n_layer):
            key_a, key_b = (la, lb) if basis.layernorm == "folded" else (0, 0)
            for kind in kinds:
                if (key_a, key_b, kind) not in stats:
                    s = _scores(left[key_a], right[key_b][kind])
                    stats[key_a, key_b, kind] = (float(s.mean()), float(s.std()))
                out[kind][la, lb] = stats[key_a, key_b, kind]
    return out


def score_table(model: Transformer | CircuitWeights, seed: int, step: int, samples: int, baseline_seed: int,
                kinds: Sequence[str] = KINDS, layernorms: Sequence[str] = LAYERNORMS) -> dict[str, np.ndarray | list]:
    """Every pair's scores in both bases and the LayerNorm treatments ``layernorms``, with
    baselines from ``samples`` random head pairs: columns of :data:`SCORES_SCHEMA`."""
    model = circuit_weights(model)  # once: every basis below reads the same weights
    gen = torch.Generator().manual_seed(baseline_seed)
    heads_a = random_heads(samples, model.d_model, model.d_head, gen)
    heads_b = random_heads(samples, model.d_model, model.d_head, gen)
    cols: dict[str, list] = {k: [] for k in SCORES_SCHEMA.columns}
    for layernorm in layernorms:
        for basis_name in BASES:
            basis = basis_of(model, basis_name, layernorm)
            f = head_factors(model, basis)
            base = baselines(basis, heads_a, heads_b, kinds)
            a_idx, b_idx = np.nonzero(f.layer[None, :] > f.layer[:, None])
            la, lb = f.layer[a_idx], f.layer[b_idx]
            n = len(a_idx)
            for kind in kinds:
                s = composition_scores(f, kind).numpy()
                cols["seed"] += [seed] * n
                cols["step"] += [step] * n
                cols["layernorm"] += [layernorm] * n
                cols["basis"] += [basis_name] * n
                cols["kind"] += [kind] * n
                cols["layer_a"].append(la)
                cols["head_a"].append(f.head[a_idx])
                cols["layer_b"].append(lb)
                cols["head_b"].append(f.head[b_idx])
                cols["score"].append(s[a_idx, b_idx])
                cols["baseline_mean"].append(base[kind][la, lb, 0])
                cols["baseline_std"].append(base[kind][la, lb, 1])
    for k in ("layer_a", "head_a", "layer_b", "head_b"):
        cols[k] = np.concatenate(cols[k]).astype(np.int32)
    for k in ("score", "baseline_mean", "baseline_std"):
        cols[k] = np.concatenate(cols[k]).astype(np.float64)
    return cols
