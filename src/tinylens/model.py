"""The character-level transformer of method.md §1, in one readable file.

Decoder-only, pre-LayerNorm, modules in the order data flows through them::

    x = tok_emb(idx) + pos_emb(pos)
    for each block:  sa_out = sa(ln1(x)); ffwd_out = ffwd(ln2(x + sa_out))
                     x = x + sa_out + ffwd_out
    logits = lm_head(ln_f(x))

Two options make the variant models of method.md §14 (``ModelConfig``): ``tie_embeddings``, the unembedding
sharing the token embedding's weight (source 001's premise), and ``norm = "rmsnorm"``, RMSNorm in place of
every LayerNorm (source 003's setting). Both default to the paper's model.

The query/key/value maps of all heads are fused into one bias-free
``Linear(d_model, 3 * d_model)``: the same parameters and the same maths as
one ``Linear(d_model, d_head)`` per head (``tinylens.reference`` holds that
per-head form and a test checks both give the same logits).

Every intermediate passes through a ``hook`` when one is given (:class:`Hook`);
``tinylens.interventions`` names them and records or edits them. This module
imports nothing else from the project but its shape (``tinylens.model_config``,
torch-free): the model knows neither the analyses nor the disk
(``tinylens.weights`` reads and writes it).
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinylens.model_config import ModelConfig


class Hook(Protocol):
    """What :meth:`Block.forward` calls at every hook point (see ``tinylens.interventions``).

    ``hook(name, value)`` returns the value the forward pass continues with (the
    same tensor, or an edited one). ``internals`` asks the attention for its
    query/key/value, pattern and per-head outputs (the slower explicit softmax);
    without it the fused kernel runs and only the block-level points are called.
    """

    internals: bool

    def __call__(self, name: str, value: Tensor) -> Tensor: ...


class CausalSelfAttention(nn.Module):
    """All heads at once: fused QKV, scaled dot-product, causal mask, then ``proj``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.d_head = cfg.n_head, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.register_buffer(
            "causal_mask",
            torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool)),
            persistent=False,
        )

    def forward(self, x: Tensor, return_pattern: bool = False, hook: Hook | None = None,
                name: str = "") -> tuple[Tensor, Tensor | None]:
        """x: [batch pos d_model] -> (out [batch pos d_model], pattern [batch n_heads pos pos] | None).

        With a ``hook`` (see :class:`Hook`), ``q``, ``k``, ``v``, ``attn_pattern`` and ``z``
        pass through it as ``{name}.q`` etc. when ``hook.internals`` is true.
        """
        batch, pos, d_model = x.shape
        # [batch pos 3*d_model] -> 3 x [batch n_heads pos d_head]
        q, k, v = (
            t.view(batch, pos, self.n_head, self.d_head).transpose(1, 2)
            for t in self.qkv(x).split(d_model, dim=2)
        )
        internals = hook is not None and hook.internals
        if internals:
            q, k, v = hook(f"{name}.q", q), hook(f"{name}.k", k), hook(f"{name}.v", v)
        if return_pattern or internals:
            # Explicit softmax so the pattern can be returned; same maths as the fused kernel.
            scores = (q @ k.transpose(-2, -1)) * self.d_head**-0.5  # [batch n_heads pos pos]
            scores = scores.masked_fill(~self.causal_mask[:pos, :pos], float("-inf"))
            pattern = F.softmax(scores, dim=-1)
            if internals:
                pattern = hook(f"{name}.attn_pattern", pattern)
            heads = self.attn_dropout(pattern) @ v  # [batch n_heads pos d_head]
            if internals:
                heads = hook(f"{name}.z", heads)
        else:
            pattern = None
            heads = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.attn_dropout.p if self.training else 0.0
            )
        heads = heads.transpose(1, 2).reshape(batch, pos, d_model)  # concatenate heads
        return self.resid_dropout(self.proj(heads)), pattern


class FeedForward(nn.Module):
    """Linear(d, 4d) -> ReLU -> Linear(4d, d) -> Dropout."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.ReLU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """The model's normalisation layer: ``LayerNorm(d_model)`` or, for ``norm = "rmsnorm"``,
    ``RMSNorm(d_model)`` (gain only, the same eps)."""
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.d_model, eps=1e-5)
    return nn.LayerNorm(cfg.d_model)


class Block(nn.Module):
    """``out = x + sa_out + ffwd_out`` with ``sa_out = sa(ln1(x))``, ``ffwd_out = ffwd(ln2(x + sa_out))``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.sa = CausalSelfAttention(cfg)
        self.ln2 = make_norm(cfg)
        self.ffwd = FeedForward(cfg)

    def forward(self, x: Tensor, hook: Hook | None = None, name: str = "") -> Tensor:
        """x: [batch pos d_model] -> block output [batch pos d_model].

        With a ``hook``, every intermediate passes through it (and may be edited)
        in forward order: ``{name}.block_input``, the attention internals,
        ``{name}.sa_out``, ``{name}.resid_mid`` (= block_input + sa_out, what
        ``ln2`` reads), ``{name}.ffwd_out``, ``{name}.block_output``
        (= resid_mid + ffwd_out).
        """
        if hook is None:  # the training path: no bookkeeping
            sa_out, _ = self.sa(self.ln1(x))
            mid = x + sa_out
            return mid + self.ffwd(self.ln2(mid))
        x = hook(f"{name}.block_input", x)
        sa_out, _ = self.sa(self.ln1(x), hook=hook, name=name)
        sa_out = hook(f"{name}.sa_out", sa_out)
        mid = hook(f"{name}.resid_mid", x + sa_out)
        ffwd_out = hook(f"{name}.ffwd_out", self.ffwd(self.ln2(mid)))
        return hook(f"{name}.block_output", mid + ffwd_out)


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = make_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size)
        if cfg.tie_embeddings:  # one parameter, read by both (its init is the embedding's: normal(0, 0.02))
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def n_params(self) -> int:
        """Parameters, each counted once (a tied unembedding is the embedding)."""
        return sum(p.numel() for p in self.parameters())

    def tied_weights(self) -> dict[str, str]:
        """State-dict keys that name another key's tensor: ``{"lm_head.weight": "tok_emb.weight"}`` when tied."""
        return {"lm_head.weight": "tok_emb.weight"} if self.config.tie_embeddings else {}

    def embed(self, idx: Tensor) -> Tensor:
        """idx: [batch pos] token ids -> [batch pos d_model]."""
        pos = idx.shape[1]
        if pos > self.config.block_size:
            raise ValueError(f"sequence of {pos} tokens exceeds block_size {self.config.block_size}")
        return self.tok_emb(idx) + self.pos_emb(torch.arange(pos, device=idx.device))

    def unembed(self, x: Tensor) -> Tensor:
        """Final residual stream [batch pos d_model] -> logits [batch pos vocab]."""
        return self.lm_head(self.ln_f(x))

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """idx, targets: [batch pos] -> (logits [batch pos vocab], mean cross-entropy | None)."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.unembed(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        return logits, loss

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, generator: torch.Generator | None = None,
                 temperature: float = 1.0) -> Tensor:
        """Sample ``max_new_tokens`` continuations of idx [batch pos]; returns [batch pos+new]."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size :])
            probs = F.softmax(logits[:, -1].float() / temperature, dim=-1)
            nxt = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def estimate_flops_per_token(cfg: ModelConfig, seq_len: int | None = None) -> float:
    """Training FLOPs per token (forward + backward), PaLM appendix B convention:
    6 x (non-embedding parameters) + 12 x n_layer x d_model x seq_len for attention."""
    seq_len = cfg.block_size if seq_len is None else seq_len
    d = cfg.d_model
    per_block = 3 * d * d + (d * d + d) + 2 * d + (8 * d * d + 5 * d) + 2 * d
    non_embedding = cfg.n_layer * per_block + 2 * d + d * cfg.vocab_size + cfg.vocab_size
    return 6 * non_embedding + 12 * cfg.n_layer * d * seq_len

