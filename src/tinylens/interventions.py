"""One way to run the model with interventions: record, edit, start anywhere.

Every analysis family reads the model through :func:`run`. A forward pass
passes each intermediate through a *hook point* with a stable name, the
same names the activation dumps use (TransformerLens's equivalent in
brackets)::

    embed                      token + position embedding        [hook_embed + hook_pos_embed]
    blocks.{b}.block_input     residual stream entering block b  [blocks.b.hook_resid_pre]
    blocks.{b}.q / .k / .v     [batch n_heads pos d_head]        [blocks.b.attn.hook_q ...]
    blocks.{b}.attn_pattern    [batch n_heads pos pos], softmax  [blocks.b.attn.hook_pattern]
    blocks.{b}.z               [batch n_heads pos d_head], per-head outputs before proj [hook_z]
    blocks.{b}.sa_out          attention output added to the stream [blocks.b.hook_attn_out]
    blocks.{b}.resid_mid       block_input + sa_out (what ln2 reads) [blocks.b.hook_resid_mid]
    blocks.{b}.ffwd_out        feed-forward output               [blocks.b.hook_mlp_out]
    blocks.{b}.block_output    resid_mid + ffwd_out              [blocks.b.hook_resid_post]
    ln_f_input                 the final residual stream (method.md's x_7)
    ln_f_output                after the final LayerNorm
    logits                     lm_head(ln_f_output)

Shapes without a ``pos`` note are ``[batch pos d_model]`` (``logits``:
``[batch pos vocab]``). Three things every family needs:

- **record**: ``run(model, tokens, record=["blocks.*.ffwd_out"])``; names are
  fnmatch patterns, ``"*"`` records everything. ``last_only=True`` keeps only
  the last position of every recorded tensor (the query axis of patterns).
- **edit**: ``edits={name: fn}`` where ``fn(value, seen) -> new value`` and
  ``seen`` maps this block's kinds seen so far (``"block_input"``,
  ``"sa_out"``, ...) and the top-level names to their tensors. The forward
  pass continues with what ``fn`` returns. :func:`drop_attention`,
  :func:`drop_feedforward`, :func:`scale` and :func:`replace` build the
  common ones.
- **start anywhere**: ``run(model, resid=x, start=b)`` feeds ``x``
  ``[batch pos d_model]`` as the residual stream entering block ``b`` (no
  position embedding added); ``start = n_layer`` goes straight to ``ln_f``.

Gradients flow unless the caller disables them (learned token subspaces and
tuned lenses train through :func:`run`). Per-head weights in the row-vector
convention come from :func:`head_weights`.

>>> import torch
>>> from tinylens.model import ModelConfig, Transformer
>>> model = Transformer(ModelConfig(vocab_size=5, block_size=4, d_model=8, n_layer=2, n_head=2, dropout=0.0)).eval()
>>> trace = run(model, torch.tensor([[0, 1, 2]]), record=["blocks.*.ffwd_out"])
>>> trace.stacked("ffwd_out").shape
torch.Size([2, 1, 3, 8])
>>> ablated = run(model, torch.tensor([[0, 1, 2]]), edits=drop_attention(1))
>>> ablated.logits.shape
torch.Size([1, 3, 5])
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from tinylens.model import Transformer
from tinylens.model_config import ACTIVATION_KINDS

#: Hook kinds of one block, in forward order.
BLOCK_HOOKS = ("block_input", "q", "k", "v", "attn_pattern", "z", "sa_out", "resid_mid", "ffwd_out",
               "block_output")
#: Hook kinds inside the attention: asking for (or editing) any of them makes the attention use
#: the explicit softmax instead of the fused kernel.
ATTENTION_HOOKS = ("q", "k", "v", "attn_pattern", "z")
#: Hook points outside the blocks.
TOP_HOOKS = ("embed", "ln_f_input", "ln_f_output", "logits")

Edit = Callable[[Tensor, Mapping[str, Tensor]], Tensor]


def hook_name(block: int, kind: str) -> str:
    """``hook_name(2, "ffwd_out") == "blocks.2.ffwd_out"``."""
    if kind not in BLOCK_HOOKS:
        raise ValueError(f"unknown block hook kind {kind!r}; choose from {BLOCK_HOOKS}")
    return f"blocks.{block}.{kind}"


def all_hook_names(n_layer: int) -> list[str]:
    """Every hook point of a model with ``n_layer`` blocks, in forward order."""
    return ["embed", *(hook_name(b, k) for b in range(n_layer) for k in BLOCK_HOOKS),
            "ln_f_input", "ln_f_output", "logits"]


@dataclass
class Trace:
    """What :func:`run` returns: the logits and every recorded hook value."""

    logits: Tensor
    cache: dict[str, Tensor] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Tensor:
        try:
            return self.cache[name]
        except KeyError:
            raise KeyError(f"{name!r} was not recorded; pass it (or a pattern matching it) in record=. "
                           f"Recorded: {sorted(self.cache)}") from None

    def stacked(self, kind: str) -> Tensor:
        """One block kind over all recorded blocks, stacked: ``[block ...]``."""
        blocks = sorted(int(k.split(".")[1]) for k in self.cache if k.startswith("blocks.") and k.endswith(f".{kind}"))
        if not blocks:
            raise KeyError(f"no block recorded {kind!r}; record 'blocks.*.{kind}'")
        return torch.stack([self.cache[hook_name(b, kind)] for b in blocks])


class _Hooks:
    """The :class:`tinylens.model.Hook` that :func:`run` passes to the blocks."""

    def __init__(self, names: list[str], record: Iterable[str], edits: Mapping[str, Edit], last_only: bool):
        patterns = list(record)
        unknown_edits = sorted(set(edits) - set(names))
        if unknown_edits:
            raise ValueError(f"edits at unknown hook points {unknown_edits}; hook points are "
                             f"'embed', 'blocks.<b>.<kind>' with kind in {BLOCK_HOOKS}, "
                             "'ln_f_input', 'ln_f_output', 'logits' (blocks this run passes through)")
        for pattern in patterns:
            if not fnmatch.filter(names, pattern):
                raise ValueError(f"record pattern {pattern!r} matches no hook point of this run "
                                 f"(hook points: {names[0]} ... {names[-1]})")
        self.record = {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
        self.edits = dict(edits)
        self.last_only = last_only
        wanted = self.record | set(self.edits)
        self.internals = any(n.rsplit(".", 1)[-1] in ATTENTION_HOOKS for n in wanted if n.startswith("blocks."))
        self.cache: dict[str, Tensor] = {}
        self.seen: dict[str, Tensor] = {}

    def __call__(self, name: str, value: Tensor) -> Tensor:
        kind = name.rsplit(".", 1)[-1] if name.startswith("blocks.") else name
        if kind == "block_input":
            self.seen = {k: v for k, v in self.seen.items() if k in TOP_HOOKS}  # a new block starts
        edit = self.edits.get(name)
        if edit is not None:
            value = edit(value, self.seen)
        self.seen[kind] = value
        if name in self.record:
            # The position axis is second to last everywhere (the query axis of attn_pattern). The last
            # position is copied: a view would keep the whole [batch pos ...] tensor alive.
            self.cache[name] = value[..., -1, :].clone() if self.last_only else value
        return value


def run(
    model: Transformer,
    tokens: Tensor | None = None,
    *,
    resid: Tensor | None = None,
    start: int = 0,
    record: Iterable[str] = (),
    edits: Mapping[str, Edit] | None = None,
    last_only: bool = False,
) -> Trace:
    """Run ``model`` from token ids or from a residual stream, recording and editing hook points.

    tokens: ``[batch pos]`` ids (start must be 0), or resid: ``[batch pos d_model]`` entering
    block ``start`` (``0 <= start <= n_layer``). Returns a :class:`Trace` whose ``logits`` are
    ``[batch pos vocab]`` (``[batch vocab]`` with ``last_only``).
    """
    n_layer = model.config.n_layer
    if (tokens is None) == (resid is None):
        raise ValueError("pass exactly one of tokens= (token ids) and resid= (a residual stream)")
    if not 0 <= start <= n_layer:
        raise ValueError(f"start must be a block index in 0..{n_layer} ({n_layer} = the input of ln_f), not {start}")
    if tokens is not None and start != 0:
        raise ValueError("token ids enter at the embedding: use resid= to start at a later block")
    names = [*(["embed"] if tokens is not None else []),
             *(hook_name(b, k) for b in range(start, n_layer) for k in BLOCK_HOOKS),
             "ln_f_input", "ln_f_output", "logits"]
    hooks = _Hooks(names, record, edits or {}, last_only)
    x = hooks("embed", model.embed(tokens)) if tokens is not None else resid
    for b in range(start, n_layer):
        x = model.blocks[b](x, hook=hooks, name=f"blocks.{b}")
    x = hooks("ln_f_input", x)
    if last_only and not any(n in hooks.edits for n in ("ln_f_output", "logits")):
        x = x[:, -1:]  # only the last position is unembedded: the others are never used
        hooks.last_only = False
        normed = hooks("ln_f_output", model.ln_f(x)[:, 0])
        logits = hooks("logits", model.lm_head(normed))
    else:
        normed = hooks("ln_f_output", model.ln_f(x))
        logits = hooks("logits", model.lm_head(normed))
        if last_only:
            logits = logits[:, -1]
    return Trace(logits=logits, cache=hooks.cache)


def run_in_batches(model: Transformer, tokens: Tensor | None = None, *, resid: Tensor | None = None,
                   batch_size: int = 2048, **options) -> Trace:
    """:func:`run` over ``batch_size`` sequences at a time, the logits and the recorded values joined
    along the batch axis (every hook value has it first): what a whole prompt set costs in memory is
    one batch's activations, not all of them at once. ``options`` go to :func:`run`; an edit must
    treat every sequence alike (no per-sequence tensors: a batch would see the wrong rows)."""
    inputs = tokens if tokens is not None else resid
    if inputs is None:
        raise ValueError("pass exactly one of tokens= (token ids) and resid= (a residual stream)")
    traces = [run(model, **({"tokens": part} if tokens is not None else {"resid": part}), **options)
              for part in inputs.split(batch_size)]
    if len(traces) == 1:
        return traces[0]
    return Trace(logits=torch.cat([t.logits for t in traces]),
                 cache={name: torch.cat([t.cache[name] for t in traces]) for name in traces[0].cache})


def record_activations(model: Transformer, idx: Tensor, positions: str = "last",
                       patterns: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """A forward pass that also returns every block's :data:`ACTIVATION_KINDS`, stacked over blocks.

    Returns ``(logits, acts)``. With ``positions="all"``: logits ``[batch pos vocab]``; ``acts[name]`` is
    ``[block batch pos d_model]`` for ``block_input``/``sa_out``/``ffwd_out`` and
    ``[block batch n_heads pos pos]`` for ``attn_pattern``. With ``positions="last"`` the ``pos`` axis of
    the logits and of the activations (the query axis of the pattern) is dropped, keeping the last
    position only: ``[batch vocab]``, ``[block batch d_model]`` and ``[block batch n_heads pos]``.
    ``patterns=False`` leaves out ``attn_pattern`` and uses the fused attention kernel.
    """
    if positions not in ("last", "all"):
        raise ValueError(f"positions must be 'last' or 'all', not {positions!r}")
    kinds = [k for k in ACTIVATION_KINDS if patterns or k != "attn_pattern"]
    trace = run(model, idx, record=[f"blocks.*.{k}" for k in kinds], last_only=positions == "last")
    return trace.logits, {k: trace.stacked(k) for k in kinds}


# --- edits -------------------------------------------------------------------------------------

def drop_attention(block: int) -> dict[str, Edit]:
    """Block ``block``'s output becomes ``block_input + ffwd_out`` (method.md §7 drop-sa): the
    feed-forward still reads ``ln2(block_input + sa_out)``; only the residual add of ``sa_out`` goes."""
    return {hook_name(block, "block_output"): lambda out, seen: seen["block_input"] + seen["ffwd_out"]}


def drop_feedforward(block: int) -> dict[str, Edit]:
    """Block ``block``'s output becomes ``block_input + sa_out`` (method.md §7 drop-ffwd)."""
    return {hook_name(block, "block_output"): lambda out, seen: seen["resid_mid"]}


def scale(name: str, factor: float) -> dict[str, Edit]:
    """Multiply the value at hook point ``name`` by ``factor``."""
    return {name: lambda value, seen: value * factor}


def replace(name: str, new: Tensor) -> dict[str, Edit]:
    """Replace the value at hook point ``name`` by ``new`` (broadcast to its shape)."""
    return {name: lambda value, seen: new.to(value.dtype).expand_as(value)}


# --- weights -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class HeadWeights:
    """One block's attention weights per head, row-vector convention (``q = x @ W_Q[h]``).

    W_Q, W_K, W_V: ``[n_heads d_model d_head]``; W_O: ``[n_heads d_head d_model]``;
    b_O: ``[d_model]`` (the ``proj`` bias, shared by all heads). The attention output is
    ``sa_out = sum_h z_h @ W_O[h] + b_O`` and its scores ``(q @ k^T) / sqrt(d_head)``.
    """

    W_Q: Tensor
    W_K: Tensor
    W_V: Tensor
    W_O: Tensor
    b_O: Tensor

    @property
    def W_OV(self) -> Tensor:
        """``W_V[h] @ W_O[h]``: ``[n_heads d_model d_model]`` (materialised; small models only)."""
        return self.W_V @ self.W_O

    @property
    def W_QK(self) -> Tensor:
        """``W_Q[h] @ W_K[h]^T``: ``[n_heads d_model d_model]`` (scores before the 1/sqrt(d_head))."""
        return self.W_Q @ self.W_K.transpose(-1, -2)


def head_weights(model: Transformer, block: int) -> HeadWeights:
    """Split block ``block``'s fused ``qkv`` and its ``proj`` into per-head matrices."""
    cfg = model.config
    sa = model.blocks[block].sa
    # qkv.weight: [3*d_model d_model] with rows (q | k | v); head h owns rows h*d_head:(h+1)*d_head of each.
    w_q, w_k, w_v = sa.qkv.weight.detach().split(cfg.d_model, dim=0)

    def per_head(w: Tensor) -> Tensor:  # [d_model(out) d_model(in)] -> [n_heads d_model(in) d_head]
        return w.view(cfg.n_head, cfg.d_head, cfg.d_model).transpose(1, 2).contiguous()

    # proj.weight: [d_model(out) d_model(in)], input column h*d_head + i comes from head h.
    w_o = sa.proj.weight.detach().T.reshape(cfg.n_head, cfg.d_head, cfg.d_model).contiguous()
    return HeadWeights(W_Q=per_head(w_q), W_K=per_head(w_k), W_V=per_head(w_v), W_O=w_o,
                       b_O=sa.proj.bias.detach().clone())


def head_outputs(model: Transformer, block: int, z: Tensor) -> Tensor:
    """Each head's write to the residual stream (without the shared bias).

    z: ``[batch n_heads pos d_head]`` (the ``blocks.{b}.z`` hook) -> ``[batch n_heads pos d_model]``;
    summed over heads plus ``b_O`` this is ``sa_out``.
    """
    w_o = head_weights(model, block).W_O.to(z.dtype)
    return torch.einsum("bhpe,hed->bhpd", z, w_o)


def direct_logits(model: Transformer, components: Tensor, final_resid: Tensor) -> Tensor:
    """Each component's direct effect on the logits (TransformerLens's direct-logit attribution).

    components: ``[batch ... pos d_model]``, terms of the final residual stream (a head's output
    from :func:`head_outputs`, a ``sa_out``, a ``ffwd_out``); final_resid: ``[batch pos d_model]``,
    the ``ln_f_input`` of the same run. ``ln_f`` is linearised at ``final_resid`` as
    TransformerLens does: each component is centred, divided by the scale ``ln_f`` computed from
    ``final_resid`` at that position, multiplied by its gain, then by ``lm_head``'s weight (no
    biases). Returns ``[batch ... pos vocab]``; over all terms of ``final_resid`` the sum plus
    ``lm_head(ln_f.bias)`` is the model's logits.
    """
    ln_f = model.ln_f
    centred = final_resid - final_resid.mean(-1, keepdim=True)
    scale = (centred.pow(2).mean(-1, keepdim=True) + ln_f.eps).sqrt()  # [batch pos 1]
    extra = components.dim() - final_resid.dim()
    if extra < 0 or components.shape[0] != final_resid.shape[0] or components.shape[-2:] != final_resid.shape[-2:]:
        raise ValueError(f"components {tuple(components.shape)} must be [batch ... pos d_model] "
                         f"for final_resid {tuple(final_resid.shape)}")
    scale = scale.view(scale.shape[0], *([1] * extra), *scale.shape[1:])
    normed = (components - components.mean(-1, keepdim=True)) / scale * ln_f.weight
    return normed @ model.lm_head.weight.T
