"""The model a measurement runs on, as the few things §8's measures read (method.md §8, §13).

:mod:`tinylens.dynamics.measure` never touches a model's modules: it asks a subject for logits and
token states, attention patterns and each head's write to the residual stream, the final layer norm
and unembedding applied to a residual vector, and the weights of the eigenvalue copying score.
:class:`NativeSubject` answers for our :class:`~tinylens.model.Transformer` through
:func:`tinylens.interventions.run`; :class:`tinylens.external.bridge.BridgeSubject` for any model
TransformerLens 4 loads. The same measurement code then serves both, so one reading of the tables
and figures serves both.

Depths of the token states: the embedding output (the residual stream entering block 0), the
output of every block, the output of the final layer norm: ``n_layer + 2``.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from tinylens.interventions import direct_logits, head_outputs, head_weights, hook_name, run
from tinylens.model import Transformer


class Subject(Protocol):
    """What §8's measurements read from a model (shapes in the package's dimension names)."""

    n_layer: int
    n_head: int

    def forward(self, tokens: Tensor, states: bool = False) -> tuple[Tensor, Tensor | None]:
        """(logits ``[batch pos vocab]``, token states ``[depth batch pos d_model]`` or None)."""

    def final_logits(self, resid: Tensor) -> Tensor:
        """The final layer norm and unembedding of a residual stream ``[batch pos d_model]``."""

    def heads(self, tokens: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """Per block the attention pattern ``[batch n_heads pos pos]`` and each head's write
        ``[batch n_heads pos d_model]``; and the final layer norm's input ``[batch pos d_model]``."""

    def direct_logits(self, components: Tensor, final_resid: Tensor) -> Tensor:
        """Components' direct effect on the logits, the final layer norm linearised at ``final_resid``."""

    def copying_weights(self) -> tuple[Tensor, list[tuple[Tensor, Tensor]], Tensor]:
        """(W_E ``[vocab d_model]``, per block (W_V ``[n_heads d_model d_head]``, W_O ``[n_heads d_head
        d_model]``), W_U ``[d_model vocab]``)."""


class NativeSubject:
    """Our own :class:`~tinylens.model.Transformer`, run through :func:`tinylens.interventions.run`."""

    def __init__(self, model: Transformer):
        self.model = model
        self.n_layer, self.n_head = model.config.n_layer, model.config.n_head

    def forward(self, tokens: Tensor, states: bool = False) -> tuple[Tensor, Tensor | None]:
        record = ["embed", "blocks.*.block_output", "ln_f_output"] if states else []
        trace = run(self.model, tokens, record=record)
        if not states:
            return trace.logits, None
        stacked = torch.stack([trace["embed"], *(trace[hook_name(b, "block_output")] for b in range(self.n_layer)),
                               trace["ln_f_output"]])
        return trace.logits, stacked

    def final_logits(self, resid: Tensor) -> Tensor:
        return run(self.model, resid=resid, start=self.n_layer).logits

    def heads(self, tokens: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
        trace = run(self.model, tokens, record=["blocks.*.attn_pattern", "blocks.*.z", "ln_f_input"])
        patterns = [trace[hook_name(b, "attn_pattern")] for b in range(self.n_layer)]
        writes = [head_outputs(self.model, b, trace[hook_name(b, "z")]) for b in range(self.n_layer)]
        return patterns, writes, trace["ln_f_input"]

    def direct_logits(self, components: Tensor, final_resid: Tensor) -> Tensor:
        return direct_logits(self.model, components, final_resid)

    def copying_weights(self) -> tuple[Tensor, list[tuple[Tensor, Tensor]], Tensor]:
        per_block = [(w.W_V, w.W_O) for w in (head_weights(self.model, b) for b in range(self.n_layer))]
        return self.model.tok_emb.weight.detach(), per_block, self.model.lm_head.weight.detach().T


def as_subject(model: Transformer | Subject) -> Subject:
    """A subject for ``model``: ours wrapped in :class:`NativeSubject`, any other subject as it is."""
    return NativeSubject(model) if isinstance(model, Transformer) else model
