"""One phase-change run: train an attention-only model, measuring every scheduled checkpoint
(method.md §8b). Measuring inside the training job keeps no checkpoint files: a run's job trains
each of its seeds and writes its curves (one row per seed and checkpoint), its heads (one row per
seed, checkpoint, head and probe period) and its composition (one row per seed, checkpoint and
pair of heads in an earlier and a later layer).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from tinylens.dynamics.energy import interaction_energy
from tinylens.dynamics.heads import copying_score_eigen, prefix_matching_pattern, repeat_queries
from tinylens.dynamics.icl import icl_score, single_position_score
from tinylens.measures import standard_error
from tinylens.phase_change.data import MixtureSettings, Probes, ProbeSettings, mixture_source, mixture_windows
from tinylens.phase_change.mechanism import ablation_rows, composition_rows, previous_token_scores, random_pairs
from tinylens.phase_change.model import AttentionOnly, AttentionOnlyConfig


@dataclass(frozen=True)
class RunSettings:
    """One run (config ``phase_change.runs.<name>`` over ``phase_change.base``): the model's shape,
    the optimisation, the data mixture, the seed, and the checkpoints: step 0, then log-spaced from
    ``first`` by factor ``ratio`` (so a window is located to within ``ratio - 1`` of its step)."""

    n_layer: int
    d_model: int
    n_head: int
    context: int
    batch_size: int
    steps: int
    lr: float
    weight_decay: float
    warmup: int
    schedule: str
    mixture: MixtureSettings
    seed: int
    first: int
    ratio: float

    def __post_init__(self) -> None:
        if isinstance(self.mixture, Mapping):
            object.__setattr__(self, "mixture", MixtureSettings(**self.mixture))
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"phase_change schedule must be 'cosine' or 'constant', got {self.schedule!r}")
        if self.ratio <= 1:
            raise ValueError(f"phase_change ratio must exceed 1, got {self.ratio}")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.context


def checkpoint_steps(first: int, ratio: float, steps: int) -> list[int]:
    """0, then round(first * ratio**k) (each at least one more than the last) up to ``steps``, and ``steps``.

    >>> checkpoint_steps(10, 1.5, 40)
    [0, 10, 15, 22, 34, 40]
    """
    out, x = [0], float(first)
    while round(x) < steps:
        s = max(round(x), out[-1] + 1)
        if s >= steps:
            break
        out.append(s)
        x = max(x * ratio, s + 1)
    return [*out, steps]


def learning_rate(step: int, s: RunSettings) -> float:
    """Linear warm-up over ``warmup`` steps, then constant or cosine decay to a tenth at ``steps``."""
    if step < s.warmup:
        return s.lr * (step + 1) / s.warmup
    if s.schedule == "constant":
        return s.lr
    progress = (step - s.warmup) / max(1, s.steps - s.warmup)
    return s.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _losses(model: AttentionOnly, windows: np.ndarray, batch: int = 256) -> np.ndarray:
    """Per-token loss ``[windows pos]`` of windows ``[n context+1]``."""
    out = []
    for i in range(0, len(windows), batch):
        w = torch.from_numpy(windows[i : i + batch])
        logits, _, _ = model(w[:, :-1])
        out.append(F.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none"))
    return torch.cat(out).double().numpy()


def per_sequence_prefix_matching(pattern: torch.Tensor, tokens: torch.Tensor, period: int) -> torch.Tensor:
    """Prefix-matching score per sequence and head, ``[batch n_heads]`` (the dynamics family's score,
    :func:`tinylens.dynamics.heads.prefix_matching_score`, before its mean over sequences)."""
    queries = repeat_queries(tokens.shape[1], period)
    rows = pattern[:, :, queries]
    masks = prefix_matching_pattern(tokens)[:, None, queries]
    return (rows * masks).sum((-1, -2)) / rows.sum((-1, -2))


@torch.no_grad()
def measure(model: AttentionOnly, probes: Probes, ps: ProbeSettings, final: bool,
            pairs=None) -> tuple[dict, list[dict], list[dict]]:
    """One checkpoint -> its row of curves, its rows of heads (one per head and probe period) and its rows of
    composition (one per pair of heads in an earlier and a later layer; ``pairs``: the baseline's random
    heads, :func:`tinylens.phase_change.mechanism.random_pairs`). The ablation only at the ``final`` one."""
    model.eval()
    row: dict = {}
    val = _losses(model, probes.val)
    row["val_loss"] = float(val.mean())
    row["loss_by_position"] = val.mean(0).tolist()
    row["icl"], row["icl_se"] = icl_score(val, ps.early_band, ps.late_band)
    row["icl_single"], row["icl_single_se"] = single_position_score(val, ps.single_positions)
    mix = _losses(model, probes.mixture)
    row["mixture_loss"] = float(mix.mean())
    row["mixture_loss_by_position"] = mix.mean(0).tolist()
    row["mixture_icl"], row["mixture_icl_se"] = icl_score(mix, ps.early_band, ps.late_band)
    if final:
        big = _losses(model, probes.final)
        row["final_icl"], row["final_icl_se"] = icl_score(big, ps.early_band, ps.late_band)
        row["final_icl_single"], row["final_icl_single_se"] = single_position_score(big, ps.single_positions)
    # seed 000's quantities: interaction energy of the final residual stream, KL(model || unigram)
    w = torch.from_numpy(probes.val[: ps.energy_windows, :-1])
    logits, _, resid = model(w)
    row["energy"] = float(interaction_energy(resid.double()).mean())
    logp = logits.double().log_softmax(-1)
    logq = torch.from_numpy(probes.unigram).double().clamp_min(1e-300).log()
    row["kl_unigram"] = float((logp.exp() * (logp - logq)).sum(-1).mean())
    # the repeated random-token probes: copy losses and per-head prefix matching
    copy_diffs, heads = [], []
    cfg = model.cfg
    copying = copying_score_eigen(*model.ov_circuits()).tolist()
    for p, seqs in probes.repeated.items():
        s = torch.from_numpy(seqs)
        logits, patterns, _ = model(s[:, :-1], patterns=True)
        loss = F.cross_entropy(logits.transpose(1, 2), s[:, 1:], reduction="none").double()
        # position t predicts token t+1: the first copy's predictable targets are tokens 1..p-1, the
        # second copy's (predictable by induction) tokens p+1..2p-1
        copy_diffs.append((loss[:, p : 2 * p - 1].mean(1) - loss[:, : p - 1].mean(1)).numpy())
        for layer, a in enumerate(patterns):
            a = a.double()
            scores = per_sequence_prefix_matching(a, s[:, :-1], p)  # [batch heads]
            previous = previous_token_scores(a)  # [batch heads]
            for h in range(cfg.n_head):
                heads.append(dict(layer=layer, head=h, period=p, prefix_matching=float(scores[:, h].mean()),
                                  prefix_matching_se=standard_error(scores[:, h]),
                                  previous_token=float(previous[:, h].mean()),
                                  previous_token_se=standard_error(previous[:, h]),
                                  copying=float(copying[layer * cfg.n_head + h])))
    d = np.concatenate(copy_diffs)
    row["copy_loss_drop"] = float(d.mean())
    row["copy_loss_drop_se"] = standard_error(d)
    if final:
        ablated = {(r["layer"], r["head"], r["period"]): r for r in ablation_rows(model, probes.repeated)}
        for h in heads:
            r = ablated[h["layer"], h["head"], h["period"]]
            h.update(ablation_raise=r["ablation_raise"], ablation_raise_se=r["ablation_raise_se"])
    pair_rows = composition_rows(model, pairs) if pairs is not None and cfg.n_layer > 1 else []
    model.train()
    return row, heads, pair_rows


def train_run(train_ids: np.ndarray, vocab_size: int, probes: Probes, ps: ProbeSettings, s: RunSettings,
              progress: bool = True) -> tuple[list[dict], list[dict], list[dict]]:
    """Train one seed from scratch; rows of curves, heads and composition at every checkpoint (each with
    ``step`` and ``seed``)."""
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    model = AttentionOnly(AttentionOnlyConfig(vocab_size, s.context, s.d_model, s.n_layer, s.n_head))
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98))
    pairs = random_pairs(model, ps.baseline_samples, ps.seed) if s.n_layer > 1 else None
    saves = set(checkpoint_steps(s.first, s.ratio, s.steps))
    source = mixture_source(train_ids, s.mixture)
    curves, heads, composition, batch_losses = [], [], [], []
    start = time.process_time()
    for step in tqdm(range(s.steps + 1), disable=not progress, unit="step", file=sys.stderr, mininterval=5.0):
        if step in saves:
            row, head_rows, pair_rows = measure(model, probes, ps, final=step == s.steps, pairs=pairs)
            row.update(step=step, seed=s.seed, tokens=step * s.tokens_per_step, lr=learning_rate(step, s),
                       train_loss=float(np.mean(batch_losses)) if batch_losses else float("nan"),
                       cpu_seconds=time.process_time() - start)
            curves.append(row)
            heads += [dict(step=step, seed=s.seed, **h) for h in head_rows]
            composition += [dict(step=step, seed=s.seed, **r) for r in pair_rows]
            batch_losses = []
        if step == s.steps:
            break
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, s)
        w = torch.from_numpy(mixture_windows(source, s.batch_size, s.context + 1, s.mixture, rng))
        logits, _, _ = model(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab_size), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        batch_losses.append(loss.item())
    return curves, heads, composition
