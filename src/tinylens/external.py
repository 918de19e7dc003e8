"""Any transformer TransformerLens 4 loads, measured as our own models are (method.md §13).

A model is named by a *source*: a Hugging Face hub name (``EleutherAI/pythia-70m``) whose
checkpoints are revisions (``step1000``), or a local folder holding one subfolder per checkpoint
(``<folder>/step1000/``: a Hugging Face model folder with its tokenizer, or a folder written by
``tinylens export``). Each checkpoint is loaded the same way (:func:`load_bridge`) into a
:class:`~transformer_lens.model_bridge.TransformerBridge`; :class:`BridgeSubject` lets the
training-dynamics measurements (:mod:`tinylens.dynamics.measure`) read it, and
:func:`circuit_weights` gives the weight-only composition (:mod:`tinylens.circuits.composition`)
its weights. The corpus is tokenised by the model's own tokenizer (:func:`tokenize_text`).

Where a model's checkpoints are, and whether they load here, is :mod:`tinylens.sources` (torch-free, read
when the workflow plans): without network access a hub model that is not in the local Hugging Face cache
is an :class:`ExternalModelUnavailable` error naming the model and what to do, before any job runs.

>>> from tinylens.external import load_bridge, BridgeSubject      # doctest: +SKIP
>>> subject = BridgeSubject(load_bridge("EleutherAI/pythia-70m", 1000))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from tinylens.circuits.composition import CircuitWeights
from tinylens.sources import (
    EXTERNAL_SEED,
    REVISION,
    ExternalModelUnavailable,
    check_available,
    checkpoint_folder,
    checkpoint_stream,
    is_local,
)

__all__ = ["EXTERNAL_SEED", "REVISION", "ExternalModelUnavailable", "check_available", "load_bridge", "load_folder",
           "tokenize_text", "BridgeSubject", "circuit_weights", "model_config", "measure_checkpoints"]

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

def load_bridge(source: str, step: int, revision: str = REVISION, device: str = "cpu") -> TransformerBridge:
    """Checkpoint ``step`` of ``source`` as a TransformerBridge in eval mode (the raw weights: no LayerNorm
    folding, no centring), the same code path for a hub name and a local folder."""
    from tinylens.export import _import_transformer_lens

    _import_transformer_lens()  # a clear message when TransformerLens is missing
    from transformer_lens.model_bridge import TransformerBridge

    if is_local(source):
        return load_folder(checkpoint_folder(source, step, revision), device)
    check_available(source, [step], revision)
    bridge = TransformerBridge.boot_transformers(source, device=device, revision=revision.format(step=step))
    return bridge.eval()


def load_folder(folder: str | Path, device: str = "cpu") -> TransformerBridge:
    """One checkpoint's folder (a Hugging Face model folder with its tokenizer, or a ``tinylens export``
    folder) as a TransformerBridge in eval mode, the raw weights."""
    from tinylens.export import _import_transformer_lens, load_exported

    _import_transformer_lens()
    from transformer_lens.model_bridge import TransformerBridge

    folder = Path(folder)
    if (folder / "tl_config.json").exists():
        return load_exported(folder, device=device)
    return TransformerBridge.boot_transformers(str(folder), device=device).eval()


def tokenize_text(bridge: TransformerBridge, text: str, chunk: int = 1 << 20) -> np.ndarray:
    """``text`` as the model's own token ids (no BOS), int64; in chunks of characters so long corpora do not
    hit the tokenizer's single-call limits (a token may split at a chunk boundary: negligible)."""
    tok = bridge.tokenizer
    ids = [tok(text[i : i + chunk], add_special_tokens=False)["input_ids"] for i in range(0, len(text), chunk)]
    return np.asarray([i for part in ids for i in part], dtype=np.int64)


class BridgeSubject:
    """A TransformerBridge as a :class:`~tinylens.dynamics.subjects.Subject`.

    Token states: ``blocks.0.hook_resid_pre`` (the embedding output), every ``blocks.{b}.hook_resid_post``,
    ``ln_final.hook_out``; patterns ``blocks.{b}.attn.hook_pattern``; a head's write ``hook_z @ W_O[h]``.
    The final norm is linearised at its input for direct logits as TransformerLens does (LayerNorm)."""

    def __init__(self, bridge: TransformerBridge):
        self.bridge = bridge
        self.n_layer, self.n_head = bridge.cfg.n_layers, bridge.cfg.n_heads

    def _run(self, tokens: Tensor, names: list[str]) -> tuple[Tensor, dict]:
        logits, cache = self.bridge.run_with_cache(tokens, names_filter=lambda n: n in names)
        return logits, cache

    def forward(self, tokens: Tensor, states: bool = False) -> tuple[Tensor, Tensor | None]:
        if not states:
            return self.bridge(tokens), None
        names = ["blocks.0.hook_resid_pre", *(f"blocks.{b}.hook_resid_post" for b in range(self.n_layer)),
                 "ln_final.hook_out"]
        logits, cache = self._run(tokens, names)
        return logits, torch.stack([cache[n] for n in names])

    def final_logits(self, resid: Tensor) -> Tensor:
        return self.bridge.unembed(self.bridge.ln_final(resid))

    def heads(self, tokens: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
        names = [*(f"blocks.{b}.attn.hook_{k}" for b in range(self.n_layer) for k in ("pattern", "z")),
                 "ln_final.hook_in"]
        _, cache = self._run(tokens, names)
        patterns = [cache[f"blocks.{b}.attn.hook_pattern"] for b in range(self.n_layer)]
        writes = [torch.einsum("bphe,hed->bhpd", cache[f"blocks.{b}.attn.hook_z"],
                               self.bridge.blocks[b].attn.W_O.to(cache[f"blocks.{b}.attn.hook_z"].dtype))
                  for b in range(self.n_layer)]
        return patterns, writes, cache["ln_final.hook_in"]

    def direct_logits(self, components: Tensor, final_resid: Tensor) -> Tensor:
        ln = self.bridge.ln_final
        gain = ln.weight if hasattr(ln, "weight") else ln.original_component.weight
        eps = self.bridge.cfg.eps
        centred = final_resid - final_resid.mean(-1, keepdim=True)
        scale = (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt()  # [batch pos 1]
        extra = components.dim() - final_resid.dim()
        scale = scale.view(scale.shape[0], *([1] * extra), *scale.shape[1:])
        normed = (components - components.mean(-1, keepdim=True)) / scale * gain
        return normed @ self.bridge.W_U

    def copying_weights(self) -> tuple[Tensor, list[tuple[Tensor, Tensor]], Tensor]:
        b = self.bridge
        return (b.W_E.detach(), [(blk.attn.W_V.detach(), blk.attn.W_O.detach()) for blk in b.blocks],
                b.W_U.detach())


def _gain(norm) -> Tensor:
    return (norm.weight if hasattr(norm, "weight") else norm.original_component.weight).detach()


def circuit_weights(bridge: TransformerBridge) -> CircuitWeights:
    """What weight-only composition reads, from a TransformerBridge (per head ``W_Q, W_K, W_V, W_O``; the
    gains of ``ln1`` and ``ln_final``; ``W_E``, ``W_U``). Rotary position embeddings are not part of it:
    composition is of the weight matrices, as TransformerLens computes it."""
    heads = tuple(tuple(getattr(blk.attn, n).detach() for n in ("W_Q", "W_K", "W_V", "W_O")) for blk in bridge.blocks)
    return CircuitWeights(bridge.W_E.detach(), bridge.W_U.detach(), heads,
                          tuple(_gain(blk.ln1) for blk in bridge.blocks), _gain(bridge.ln_final))


def model_config(bridge: TransformerBridge, context: int):
    """Our :class:`~tinylens.model_config.ModelConfig` of the bridge's shape with ``block_size`` = the probes' context:
    what the summary and figure scripts of our seeds read (``n_layer``, ``n_head``, ``block_size``)."""
    from tinylens.model import ModelConfig

    cfg = bridge.cfg
    if context > cfg.n_ctx:
        raise ValueError(f"context {context} exceeds the model's context of {cfg.n_ctx} tokens: lower the preset's "
                         "`context` key")
    return ModelConfig(vocab_size=cfg.d_vocab, d_model=cfg.d_model, n_layer=cfg.n_layers, n_head=cfg.n_heads,
                       block_size=context, dropout=0.0)


def measure_checkpoints(source: str, steps: Sequence[int], revision: str, text: str, train_fraction: float,
                        context: int, tokens_per_step: int, settings, samples: int, baseline_seed: int,
                        device: str = "cpu", progress: bool = True, onset=None, stream: str | Path | None = None) -> dict:
    """Every checkpoint of ``source`` measured as our seeds are: the token ids (the first checkpoint's tokenizer;
    its first ``train_fraction`` trains), then per checkpoint the SHA-256 of its weights as loaded
    (:func:`tinylens.phase_change.integrity.weights_digest`), the training-dynamics row and head scores
    (:func:`tinylens.dynamics.measure.measure_checkpoint`), K-composition in both bases
    (:func:`tinylens.circuits.composition.score_table`, LayerNorm ignored, as over our training) and, given
    ``onset`` (:class:`tinylens.phase_change.onset.OnsetSettings`), §8b's per-period probes
    (:func:`tinylens.phase_change.onset.measure_onset`); at the last checkpoint every pair's Q/K/V scores in
    both bases, LayerNorm ignored and folded (our final model's table). ``stream`` (a folder; hub models only):
    fetch, measure and drop one checkpoint at a time there (:func:`tinylens.sources.checkpoint_stream`).

    Returns ``config`` (a ModelConfig), ``checkpoints``/``heads`` (columns of the dynamics schemas),
    ``over_training`` and ``scores`` (columns of the composition schema), ``onset``/``onset_heads`` (columns of
    :data:`~tinylens.phase_change.onset.ONSET_SCHEMA` and of its heads schema; ``copy_loss_drop`` NaN without
    ``onset``); the model is ``EXTERNAL_SEED`` in them."""
    import logging
    import sys

    from tqdm.auto import tqdm

    from tinylens.circuits.composition import score_table
    from tinylens.dynamics.measure import CheckpointTable, measure_checkpoint
    from tinylens.dynamics.probes import make_probes
    from tinylens.phase_change.integrity import SHORT, weights_digest
    from tinylens.phase_change.onset import check_probe_periods, measure_onset, onset_probes

    log = logging.getLogger(__name__)
    if onset is not None:  # before any checkpoint is loaded: a bad probe period costs nothing
        check_probe_periods(onset.probe_periods, context, onset.lookback_periods, "onset")
    steps = sorted(steps)
    table, parts, config, probes = CheckpointTable(), [], None, None
    onset_rows, onset_heads, seen = [], [], {}
    if stream is not None and not is_local(source):
        folders = checkpoint_stream(source, steps, revision, stream)
    else:
        folders = ((s, None) for s in steps)
    for step, folder in tqdm(folders, total=len(steps), disable=not progress, unit="checkpoint", file=sys.stderr):
        bridge = load_folder(folder, device) if folder is not None else load_bridge(source, step, revision, device)
        digest = weights_digest(bridge.state_dict())
        if digest in seen:
            log.warning("step %d: weights identical to step %d's (sha256 %s)", step, seen[digest], digest[:SHORT])
        seen.setdefault(digest, step)
        if probes is None:
            config = model_config(bridge, context)
            ids = tokenize_text(bridge, text)
            split = int(len(ids) * train_fraction)
            probes = make_probes(ids[:split], ids[split:], config.vocab_size, context, settings)
            repeated = onset_probes(ids[:split], config.vocab_size, context, onset) if onset is not None else None
        subject = BridgeSubject(bridge)
        with torch.no_grad():
            table.add(step, step * tokens_per_step, *measure_checkpoint(subject, probes, settings, device))
        drop = {"copy_loss_drop": float("nan"), "copy_loss_drop_se": float("nan")}
        if repeated is not None:
            drop, per_head = measure_onset(subject, repeated, device)
            onset_heads += [{"step": step, **r} for r in per_head]
        onset_rows.append({"step": step, "tokens": step * tokens_per_step, "weights_sha256": digest, **drop})
        weights = circuit_weights(bridge)
        parts.append(score_table(weights, EXTERNAL_SEED, step, samples, baseline_seed, kinds=("K",),
                                 layernorms=("ignored",)))
        if step == steps[-1]:
            final = score_table(weights, EXTERNAL_SEED, step, samples, baseline_seed)
        del bridge, subject  # a streamed checkpoint's folder goes next: hold nothing of it
    checkpoints, heads = table.columns()
    over = {k: (np.concatenate([p[k] for p in parts]) if isinstance(parts[0][k], np.ndarray)
                else [v for p in parts for v in p[k]]) for k in parts[0]}
    onset_columns = {k: [r[k] for r in onset_rows] for k in onset_rows[0]}
    head_columns = {k: [r[k] for r in onset_heads] for k in
                    ("step", "layer", "head", "period", "prefix_matching", "prefix_matching_se", "copying")}
    return {"config": config, "checkpoints": checkpoints, "heads": heads, "over_training": over, "scores": final,
            "onset": onset_columns, "onset_heads": head_columns}
