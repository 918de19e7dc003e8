"""One checkpoint -> one row of metrics and one row per head (method.md §8; the tables: schemas.py).

Every forward pass goes through a :class:`~tinylens.dynamics.subjects.Subject` (ours: through
:func:`tinylens.interventions.run`; any TransformerLens model: :mod:`tinylens.external`); every
distance through :mod:`tinylens.measures`. Per checkpoint, on the fixed :class:`~tinylens.dynamics.probes.Probes`:

- train and validation loss, and the validation loss at every position;
- the in-context learning score: loss at a late position minus loss at an early one;
- KL(model || unigram) and KL(unigram || model) of the next-token distribution, averaged over
  positions and windows;
- the interaction energy of the validation windows' token states at every depth (embedding
  output, after each block, after ``ln_f``), over the whole window and over its prefixes;
- the unigram direction: the smallest KL(unigram || softmax(lm_head(ln_f(x)))) one trainable
  vector x reaches (fed to ``ln_f`` as the residual stream of a one-position sequence);
- per head, on the repeated random-token sequences: prefix matching, copying (eigenvalue and
  direct-logit forms), previous-token and duplicate-token scores.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from tinylens.dynamics.energy import interaction_energies
from tinylens.dynamics.heads import (
    attended_tokens,
    copying_score_eigen,
    copying_score_logits,
    detection_score,
    duplicate_token_pattern,
    prefix_matching_score,
    previous_token_pattern,
    repeat_queries,
)
from tinylens.dynamics.icl import icl_score
from tinylens.dynamics.probes import MeasureSettings, Probes
from tinylens.dynamics.schemas import HEAD_SCORES
from tinylens.dynamics.subjects import Subject, as_subject
from tinylens.measures import kl_from_logits
from tinylens.model import Transformer
from tinylens.weights import checkpoint_steps, load_checkpoint

log = logging.getLogger(__name__)

#: Windows per forward pass: bounds memory at paper scale (256 x 256 x 384 states per depth).
CHUNK = 64


def unigram_direction(model: Transformer | Subject, unigram: np.ndarray, restarts: int, steps: int, seed: int) -> float:
    """min over x of KL(unigram || softmax(lm_head(ln_f(x)))), x one trainable vector.

    x enters as the residual stream at the input of ``ln_f`` (``Subject.final_logits``: for ours
    ``run(model, resid=x, start=n_layer)``); L-BFGS with a strong-Wolfe line search, ``steps`` iterations, from
    ``restarts`` N(0, 1) starts drawn with ``seed``; the smallest KL reached, in nats.
    """
    subject = as_subject(model)
    W_E = subject.copying_weights()[0]  # [vocab d_model]
    d, device = W_E.shape[1], W_E.device
    log_u = torch.log(torch.as_tensor(unigram, dtype=torch.float64, device=device))
    x = torch.randn(restarts, 1, d, generator=torch.Generator().manual_seed(seed)).to(device).requires_grad_()
    optimizer = torch.optim.LBFGS([x], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-10, tolerance_change=1e-12)

    def kl(v: Tensor) -> Tensor:
        logits = subject.final_logits(v)[:, 0]  # [restarts vocab]
        return kl_from_logits(log_u.expand(len(v), -1), logits)  # [restarts]

    def closure() -> Tensor:
        with torch.enable_grad():
            loss = kl(x).sum()
            (x.grad,) = torch.autograd.grad(loss, x)  # gradients to x only, never to the model
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return float(kl(x.detach()).min())


def _chunks(windows: np.ndarray, device: torch.device):
    for i in range(0, len(windows), CHUNK):
        yield torch.as_tensor(windows[i : i + CHUNK], device=device)


@torch.no_grad()
def _token_losses(subject: Subject, windows: np.ndarray, device: torch.device) -> Tensor:
    """Cross-entropy at every position of every window: ``[n context]``."""
    out = []
    for chunk in _chunks(windows, device):
        logits, _ = subject.forward(chunk[:, :-1])
        out.append(F.cross_entropy(logits.transpose(1, 2).float(), chunk[:, 1:], reduction="none").double())
    return torch.cat(out)


@torch.no_grad()
def _validation_measures(model: Transformer | Subject, probes: Probes, energy_windows: int,
                         device: torch.device) -> dict[str, Tensor]:
    subject = as_subject(model)
    log_u = torch.as_tensor(np.log(probes.unigram), device=device)
    losses, kl_mu, kl_um, ie, ie_prefix = [], [], [], [], []
    for start, chunk in zip(range(0, len(probes.val), CHUNK), _chunks(probes.val, device)):
        with_energy = max(0, min(len(chunk), energy_windows - start))  # windows of this chunk that count
        logits, states = subject.forward(chunk[:, :-1], states=bool(with_energy))  # states [depth batch pos d_model]
        losses.append(F.cross_entropy(logits.transpose(1, 2).float(), chunk[:, 1:], reduction="none").double())
        u = log_u.expand_as(logits)
        kl_mu.append(kl_from_logits(logits, u))
        kl_um.append(kl_from_logits(u, logits))
        if with_energy:
            whole, prefix = interaction_energies(states[:, :with_energy])  # [depth batch] each
            ie.append(whole)
            ie_prefix.append(prefix)
    losses = torch.cat(losses)  # [windows context]
    windows = torch.cat(ie, dim=1)  # [depth windows]
    return {
        "losses": losses,
        "kl_model_unigram": torch.cat(kl_mu).mean(),
        "kl_unigram_model": torch.cat(kl_um).mean(),
        "ie": windows.mean(1),
        "ie_se": windows.std(1) / windows.shape[1] ** 0.5 if windows.shape[1] > 1 else torch.zeros(len(windows)),
        # per step along the forward pass, the windows whose IE rises there (source 000's monotone quantity)
        "ie_rises": (windows[1:] > windows[:-1]).sum(1),
        "ie_windows": windows.shape[1],
        "ie_prefix": torch.cat(ie_prefix, dim=1).mean(1),
    }


@torch.no_grad()
def head_scores(model: Transformer | Subject, probes: Probes, device: torch.device) -> dict[str, Tensor]:
    """Every head's scores on the repeated sequences: name -> ``[n_layer n_heads]`` (:data:`HEAD_SCORES`)."""
    subject = as_subject(model)
    n_layer = subject.n_layer
    pos = probes.repeated.shape[1]
    queries = repeat_queries(pos, probes.repeat_length).to(device)
    previous = previous_token_pattern(pos).to(device)
    W_E, per_block, W_U = subject.copying_weights()
    eigen = torch.stack([copying_score_eigen(W_E, W_V, W_O, W_U) for W_V, W_O in per_block])
    measured = ("prefix_matching", "copying_logit", "previous_token", "duplicate_token")
    totals = {name: torch.zeros(n_layer, subject.n_head, dtype=torch.float64, device=device) for name in measured}
    for chunk in _chunks(probes.repeated, device):
        patterns, writes, final_resid = subject.heads(chunk)
        duplicate = duplicate_token_pattern(chunk)
        share = len(chunk) / len(probes.repeated)  # each score is a mean over the chunk's sequences
        for b in range(n_layer):
            pattern = patterns[b]  # [batch n_heads pos pos]
            outputs = writes[b][:, :, queries]  # [batch n_heads q d_model]
            logits = subject.direct_logits(outputs, final_resid[:, queries])  # [batch n_heads q vocab]
            scores = {
                "prefix_matching": prefix_matching_score(pattern, chunk, probes.repeat_length),
                "copying_logit": copying_score_logits(logits, attended_tokens(pattern[:, :, queries], chunk)),
                "previous_token": detection_score(pattern, previous),
                "duplicate_token": detection_score(pattern, duplicate),
            }
            for name, value in scores.items():
                totals[name][b] += share * value.double()
    return {"copying_eigen": eigen, **totals}


def measure_checkpoint(model: Transformer | Subject, probes: Probes, settings: MeasureSettings,
                       device: torch.device | str = "cpu") -> tuple[dict, dict[str, Tensor]]:
    """All measurements of one checkpoint: (row of :func:`checkpoint_schema` without ``step`` and
    ``tokens_seen``, head scores ``name -> [n_layer n_heads]``).

    settings.icl_positions: (early, late), 0-based positions in the window (loss at late minus loss
    at early, with its standard error over windows); settings.energy_windows: the interaction energy
    is averaged over the first this many validation windows (each costs an n x n cosine matrix per
    depth).
    """
    device = torch.device(device)
    model = as_subject(model)
    icl_positions, energy_windows = settings.icl_positions, settings.energy_windows
    early, late = icl_positions
    context = probes.val.shape[1] - 1
    if not 0 <= early < late < context:
        raise ValueError(f"ICL positions must satisfy 0 <= early < late < context ({context}), got {icl_positions}")
    if not 1 <= energy_windows <= len(probes.val):
        raise ValueError(f"energy_windows ({energy_windows}) must lie in 1..{len(probes.val)} (the validation windows)")
    val = _validation_measures(model, probes, energy_windows, device)
    losses = val["losses"]
    icl = losses[:, late] - losses[:, early]  # [windows]
    band, band_se = icl_score(losses.double().cpu().numpy(), *settings.icl_bands)
    row = {
        "train_loss": float(_token_losses(model, probes.train, device).mean()),
        "val_loss": float(losses.mean()),
        "icl_score": float(icl.mean()),
        "icl_score_se": float(icl.std() / len(icl) ** 0.5),
        "icl_band": band,
        "icl_band_se": band_se,
        "kl_model_unigram": float(val["kl_model_unigram"]),
        "kl_unigram_model": float(val["kl_unigram_model"]),
        "unigram_direction_kl": unigram_direction(model, probes.unigram, settings.unigram_direction.restarts,
                                                  settings.unigram_direction.steps, settings.seed),
        "ie": val["ie"].cpu().numpy(),
        "ie_se": val["ie_se"].double().cpu().numpy(),
        "ie_rises": val["ie_rises"].cpu().numpy().astype(np.int32),
        "ie_windows": int(val["ie_windows"]),
        "ie_prefix": val["ie_prefix"].cpu().numpy(),
        "loss_by_position": losses.mean(0).cpu().numpy(),
    }
    return row, {k: v.cpu() for k, v in head_scores(model, probes, device).items()}


def measure_model(model_dir: str | Path, probes: Probes, settings: MeasureSettings, tokens_per_step: int,
                  device: torch.device | str = "cpu", progress: bool = True) -> tuple[dict, dict]:
    """Every checkpoint of one model directory, in step order: (columns of :func:`checkpoint_schema`,
    columns of :data:`HEADS_SCHEMA`; ``layer`` is 0-based)."""
    table = CheckpointTable()
    steps = checkpoint_steps(model_dir)
    log.info("%s: %d checkpoints, steps %d..%d", model_dir, len(steps), steps[0], steps[-1])
    for step in tqdm(steps, disable=not progress, unit="checkpoint", file=sys.stderr, mininterval=5.0):
        model = load_checkpoint(model_dir, step, device)
        table.add(step, step * tokens_per_step, *measure_checkpoint(model, probes, settings, device))
    return table.columns()


class CheckpointTable:
    """The measurements of one model's checkpoints as they come, one :func:`measure_checkpoint` result each, and
    their columns: the checkpoints' (:func:`checkpoint_schema`) and the heads' (:data:`HEADS_SCHEMA`, one row
    per checkpoint, layer and head, ``layer`` 0-based). Our models and external suites fill it the same way."""

    def __init__(self):
        self.rows: list[dict] = []
        self.heads: dict[str, list] = {"step": [], "layer": [], "head": [], **{name: [] for name in HEAD_SCORES}}

    def add(self, step: int, tokens_seen: int, row: dict, heads: dict[str, np.ndarray]) -> None:
        self.rows.append({"step": step, "tokens_seen": tokens_seen, **row})
        n_layer, n_head = heads["prefix_matching"].shape
        self.heads["step"] += [step] * (n_layer * n_head)
        self.heads["layer"] += [b for b in range(n_layer) for _ in range(n_head)]
        self.heads["head"] += [h for _ in range(n_layer) for h in range(n_head)]
        for name in HEAD_SCORES:
            self.heads[name] += heads[name].reshape(-1).tolist()

    def columns(self) -> tuple[dict, dict]:
        """(the checkpoints' columns, the heads' columns)."""
        checkpoints = {name: ([r[name] for r in self.rows] if name in ("step", "tokens_seen")
                              else np.asarray([r[name] for r in self.rows])) for name in self.rows[0]}
        return checkpoints, self.heads
