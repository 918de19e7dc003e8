"""The unfused attention of the original code: one module per head (method.md §1).

Kept as the baseline that ``benchmarks/train_throughput.py`` measures the
fused model against, and as evidence that the fused QKV projection is the same
model: :func:`load_fused_weights` copies a :class:`~tinylens.model.Transformer`'s
weights in, and the tests check both give the same logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinylens.model import Block, ModelConfig, Transformer


class Head(nn.Module):
    """One head: bias-free key/query/value maps, scaled scores, causal mask, softmax, dropout."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.key = nn.Linear(cfg.d_model, cfg.d_head, bias=False)
        self.query = nn.Linear(cfg.d_model, cfg.d_head, bias=False)
        self.value = nn.Linear(cfg.d_model, cfg.d_head, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(cfg.block_size, cfg.block_size)), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x: [batch pos d_model] -> [batch pos d_head]."""
        pos = x.shape[1]
        k, q = self.key(x), self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # [batch pos pos]
        wei = wei.masked_fill(self.tril[:pos, :pos] == 0, float("-inf"))
        wei = self.dropout(F.softmax(wei, dim=-1))
        return wei @ self.value(x)


class MultiHeadAttention(nn.Module):
    """Heads run one after another and concatenated, then ``proj`` and dropout."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = nn.ModuleList(Head(cfg) for _ in range(cfg.n_head))
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, return_pattern: bool = False) -> tuple[Tensor, None]:
        out = torch.cat([h(x) for h in self.heads], dim=-1)  # [batch pos d_model]
        return self.dropout(self.proj(out)), None


class ReferenceTransformer(Transformer):
    """The same model with per-head attention modules in every block."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        for block in self.blocks:
            block.sa = MultiHeadAttention(cfg)
        self.apply(self._init_weights)


def load_fused_weights(reference: ReferenceTransformer, fused: Transformer) -> ReferenceTransformer:
    """Copy ``fused``'s weights into ``reference``, splitting each QKV matrix into per-head maps."""
    cfg = fused.config
    state = {k: v for k, v in fused.state_dict().items() if ".sa.qkv." not in k}
    for b, block in enumerate(fused.blocks):
        assert isinstance(block, Block)
        # qkv.weight: [3*d_model d_model], rows = (q | k | v), each head a d_head-row slice.
        q, k, v = block.sa.qkv.weight.detach().split(cfg.d_model, dim=0)
        for h in range(cfg.n_head):
            rows = slice(h * cfg.d_head, (h + 1) * cfg.d_head)
            state[f"blocks.{b}.sa.heads.{h}.query.weight"] = q[rows]
            state[f"blocks.{b}.sa.heads.{h}.key.weight"] = k[rows]
            state[f"blocks.{b}.sa.heads.{h}.value.weight"] = v[rows]
    reference.load_state_dict(state)
    return reference
