"""Ablation (appendix IV): how far the next-token distribution moves when a block loses a term.

For block ``b`` the block output ``x_b + sa_b + ffwd_b`` becomes ``x_b + ffwd_b``
(``drop_sa``: the feed-forward still reads ``ln2(x_b + sa_b)``) or ``x_b + sa_b``
(``drop_ffwd``). Two ways to finish the forward pass (method.md §7, §12):

- ``full``: the edit is made at every position and the model runs on
  unchanged; H(last-position distribution, the unmodified model's).
- ``one_token`` (the paper's code): only the last-position vector of the
  modified block output is kept and fed as a one-token sequence through
  blocks ``b+1 ..``, ``ln_f`` and ``lm_head``, against the unmodified
  last-position vector fed the same way. The rest of the context is gone, so
  this equals ``full`` only for the last block.

>>> import torch
>>> from tinylens.model import ModelConfig, Transformer
>>> model = Transformer(ModelConfig(vocab_size=5, block_size=4, d_model=8, n_layer=2, n_head=2, dropout=0.0)).eval()
>>> h = ablation_distances(model, torch.tensor([[0, 1, 2], [3, 4, 0]]))
>>> sorted(h), h[("full", "drop_sa")].shape
([('full', 'drop_ffwd'), ('full', 'drop_sa'), ('one_token', 'drop_ffwd'), ('one_token', 'drop_sa')], (2, 2))
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from tinylens.interventions import drop_attention, drop_feedforward, hook_name, run
from tinylens.measures import hellinger, softmax
from tinylens.model import Transformer

VARIANTS = {"drop_sa": drop_attention, "drop_ffwd": drop_feedforward}
CONTEXTS = ("full", "one_token")


@torch.no_grad()
def continue_one_token(model: Transformer, vectors: Tensor, start: int) -> Tensor:
    """Logits ``[batch vocab]`` of ``vectors`` ``[batch d_model]`` fed as one-token sequences into
    the residual stream entering block ``start`` (``n_layer``: straight to ``ln_f``)."""
    return run(model, resid=vectors[:, None, :], start=start, last_only=True).logits


@torch.no_grad()
def ablation_distances(model: Transformer, tokens: Tensor, batch_size: int = 2048) -> dict[tuple[str, str], np.ndarray]:
    """Hellinger distance to the unmodified distribution, per prompt and block.

    tokens: ``[batch pos]`` prompt ids. Returns ``{(context, variant): [batch block]}`` (float64).
    """
    model.eval()
    n_layer = model.config.n_layer
    out = {(c, v): np.zeros((len(tokens), n_layer)) for c in CONTEXTS for v in VARIANTS}
    for lo in range(0, len(tokens), batch_size):
        ids = tokens[lo : lo + batch_size]
        base = run(model, ids, record=["blocks.*.block_output"], last_only=True)
        q = softmax(base.logits)
        # The residual stream entering each block, every position: an edited run starts there, since
        # the blocks before the edited one compute what they computed unedited (a third fewer block
        # passes, the same numbers bit for bit).
        inputs = run(model, ids, record=["blocks.*.block_input"]).cache
        for b in range(n_layer):
            output = hook_name(b, "block_output")
            # The unmodified last-position output, continued alone: the one-token reference.
            q_alone = softmax(continue_one_token(model, base[output], b + 1))
            for variant, edit in VARIANTS.items():
                # The edit replaces block b's output at every position; its last position is recorded
                # after the edit, which is the vector the paper's variant continues from.
                edited = run(model, resid=inputs[hook_name(b, "block_input")], start=b, edits=edit(b),
                             record=[output], last_only=True)
                out[("full", variant)][lo : lo + len(ids), b] = hellinger(softmax(edited.logits), q).numpy()
                alone = softmax(continue_one_token(model, edited[output], b + 1))
                out[("one_token", variant)][lo : lo + len(ids), b] = hellinger(alone, q_alone).numpy()
    return out


def ablation_rows(mode: str, prompt_ids, splits, distances: Mapping[tuple[str, str], np.ndarray]) -> dict[str, list]:
    """Columns of :func:`ablation_schema` for one prompt mode."""
    rows: dict[str, list] = {k: [] for k in ("mode", "prompt_id", "split", "context", "variant", "hellinger")}
    for (context, variant), h in distances.items():
        rows["mode"] += [mode] * len(h)
        rows["prompt_id"] += list(prompt_ids)
        rows["split"] += list(splits)
        rows["context"] += [context] * len(h)
        rows["variant"] += [variant] * len(h)
        rows["hellinger"] += list(h)
    return rows
