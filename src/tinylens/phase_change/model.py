"""The attention-only transformer of the phase-change runs (method.md §8b).

Pre-LayerNorm, no MLP, learned positions, as in Olsson et al.'s small attention-only models::

    x = tok_emb(idx) + pos_emb(pos)
    for each layer:  x = x + attn(ln(x))
    logits = lm_head(ln_f(x))

Separate from ``tinylens.model`` (the paper's model with its feed-forward blocks): induction needs
only attention layers composing, and without the MLPs a run of this experiment is a fraction of
the cost. ``forward(..., patterns=True)`` also returns every layer's attention pattern and
residual stream, which is all the measurements need; ``forward(..., ablate=(layer, head))`` zeroes
one head's output (before ``W_O``), the ablation of method.md §8b.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class AttentionOnlyConfig:
    """Shape of one run's model (config key ``phase_change.runs.<name>`` gives layers and width)."""

    vocab_size: int
    context: int
    d_model: int
    n_layer: int
    n_head: int

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head


class Attention(nn.Module):
    def __init__(self, cfg: AttentionOnlyConfig) -> None:
        super().__init__()
        self.n_head, self.d_head = cfg.n_head, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(cfg.context, cfg.context, dtype=torch.bool)), persistent=False)

    def forward(self, x: Tensor, pattern: bool, zero: int | None = None) -> tuple[Tensor, Tensor | None]:
        """x ``[b t d]`` -> the layer's output ``[b t d]`` and, with ``pattern``, its attention ``[b h t t]``;
        head ``zero`` (if given) contributes nothing."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, self.d_head).permute(2, 0, 3, 1, 4)  # 3 x [b h t dh]
        a = None
        if not pattern:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b h t dh]
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)  # [b h t t]
            scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
            a = scores.softmax(-1)
            y = a @ v
        if zero is not None:
            y = y.clone()
            y[:, zero] = 0
        return self.out(y.transpose(1, 2).reshape(b, t, d)), a


class AttentionOnly(nn.Module):
    def __init__(self, cfg: AttentionOnlyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context, cfg.d_model)
        self.ln = nn.ModuleList(nn.LayerNorm(cfg.d_model) for _ in range(cfg.n_layer))
        self.attn = nn.ModuleList(Attention(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: Tensor, patterns: bool = False,
                ablate: tuple[int, int] | None = None) -> tuple[Tensor, list[Tensor], Tensor]:
        """idx ``[batch pos]`` -> logits ``[batch pos vocab]``, the patterns ``[batch n_head pos pos]``
        of every layer (empty unless ``patterns``), the final residual stream ``[batch pos d_model]``.
        ``ablate``: (layer, head) whose output is zeroed."""
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        kept = []
        for layer, (ln, attn) in enumerate(zip(self.ln, self.attn)):
            y, a = attn(ln(x), patterns, ablate[1] if ablate is not None and ablate[0] == layer else None)
            x = x + y
            if a is not None:
                kept.append(a)
        return self.lm_head(self.ln_f(x)), kept, x

    def ov_circuits(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """W_E ``[vocab d]``, W_V ``[layer*head d dh]``, W_O ``[layer*head dh d]``, W_U ``[d vocab]``
        (row-vector convention, LayerNorms left out) for the eigenvalue copying score."""
        d, h, dh = self.cfg.d_model, self.cfg.n_head, self.cfg.d_head
        w_v = torch.stack([a.qkv.weight[2 * d :].T.reshape(d, h, dh).permute(1, 0, 2) for a in self.attn])
        w_o = torch.stack([a.out.weight.T.reshape(h, dh, d) for a in self.attn])
        return (self.tok_emb.weight, w_v.reshape(-1, d, dh), w_o.reshape(-1, dh, d), self.lm_head.weight.T)

    def head_weights(self) -> list[tuple[Tensor, Tensor, Tensor, Tensor]]:
        """Per layer: W_Q, W_K, W_V ``[n_head d_model d_head]`` and W_O ``[n_head d_head d_model]``
        (row-vector convention, detached), the composition scores' weights (method.md §9)."""
        d, h, dh = self.cfg.d_model, self.cfg.n_head, self.cfg.d_head
        out = []
        for a in self.attn:
            w = a.qkv.weight.detach()  # [3d d]: rows q, k, v
            q, k, v = (w[i * d : (i + 1) * d].T.reshape(d, h, dh).permute(1, 0, 2) for i in range(3))
            out.append((q, k, v, a.out.weight.detach().T.reshape(h, dh, d)))
        return out
