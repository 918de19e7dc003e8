"""The tuned lens (Belrose et al. 2023; method.md §10): one affine translator per depth.

At depth ``d`` the translator maps the residual stream ``h`` (row vector) to ``h + h A_d + b_d``,
then the frozen ``ln_f`` and ``lm_head`` read it through ``run(model, resid=..., start=n_layer)``.
``A_d`` and ``b_d`` start at zero, so an untrained tuned lens *is* the logit lens. They are trained
to minimise KL(final || lens) on training-text positions with SGD (Nesterov momentum), weight
decay, a per-depth gradient-norm clip and a linearly decaying learning rate. The last depth (the
input of ``ln_f``) needs no translator: the logit lens there is the model's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from tinylens import measures
from tinylens.attention.schemas import HISTORY_SCHEMA
from tinylens.interventions import run
from tinylens.model import Transformer
from tinylens.tables import read_csv, write_csv
from tinylens.weights import load_state, save_tensors


class TunedLens(nn.Module):
    """Translators for depths ``0..n_depths-1``: ``A`` ``[depth d_model d_model]``, ``b`` ``[depth d_model]``."""

    def __init__(self, n_depths: int, d_model: int) -> None:
        super().__init__()
        self.A = nn.Parameter(torch.zeros(n_depths, d_model, d_model))
        self.b = nn.Parameter(torch.zeros(n_depths, d_model))

    @property
    def n_depths(self) -> int:
        return self.A.shape[0]

    def translate(self, resid: Tensor) -> Tensor:
        """resid ``[depth ... d_model]`` (one slice per translator) -> the same shape, ``h + h A + b``."""
        if resid.shape[0] != self.n_depths:
            raise ValueError(f"resid has {resid.shape[0]} depths, the lens {self.n_depths} translators")
        flat = resid.reshape(self.n_depths, -1, resid.shape[-1])
        out = flat + torch.bmm(flat, self.A) + self.b[:, None, :]
        return out.reshape(resid.shape)

    def forward(self, model: Transformer, resid: Tensor) -> Tensor:
        """Logits of the tuned lens: resid ``[depth batch pos d_model]`` -> ``[depth batch pos vocab]``."""
        depth, batch, pos, d_model = resid.shape
        translated = self.translate(resid).reshape(depth * batch, pos, d_model)
        logits = run(model, resid=translated, start=model.config.n_layer).logits
        return logits.reshape(depth, batch, pos, -1)

    def state(self) -> dict[str, Tensor]:
        return {"A": self.A.detach().cpu().contiguous(), "b": self.b.detach().cpu().contiguous()}

    @classmethod
    def from_state(cls, state: dict[str, Tensor]) -> TunedLens:
        if set(state) != {"A", "b"} or state["A"].ndim != 3 or state["b"].shape != state["A"].shape[:2]:
            raise ValueError(f"a tuned lens holds A [depth d_model d_model] and b [depth d_model], got "
                             f"{ {k: tuple(v.shape) for k, v in state.items()} }")
        lens = cls(state["A"].shape[0], state["A"].shape[1])
        with torch.no_grad():
            lens.A.copy_(state["A"])
            lens.b.copy_(state["b"])
        return lens


@dataclass(frozen=True)
class LensTraining:
    """Optimiser settings (method.md §10: SGD, Nesterov 0.9, weight decay 1e-3, clip 1.0, ~250 steps)."""

    steps: int = 250
    lr: float = 1.0
    momentum: float = 0.9
    weight_decay: float = 1e-3
    clip: float = 1.0
    batch: int = 1024
    seed: int = 0


def train_tuned_lens(model: Transformer, resid: Tensor, final_logits: Tensor, settings: LensTraining,
                     progress: bool = True) -> tuple[TunedLens, list[dict]]:
    """Fit one translator per depth to the model's own distribution.

    resid ``[depth positions d_model]``: the residual streams of training-text positions at the
    depths to translate (each position taken as a one-position sequence: ``ln_f`` and ``lm_head``
    act per position); final_logits ``[positions vocab]``: the model's output at those positions.
    Every step draws ``batch`` positions (the same for all depths) and sums the depths' mean
    KL(final || lens); each translator's gradient is clipped to norm ``clip`` on its own.
    Returns the lens and one history row per step and depth (``step``, ``depth``, ``kl``, ``lr``).
    """
    n_depths, n_positions, d_model = resid.shape
    resid, final_logits = resid.detach(), final_logits.detach()
    lens = TunedLens(n_depths, d_model).to(resid.device)
    optimizer = torch.optim.SGD(lens.parameters(), lr=settings.lr, momentum=settings.momentum, nesterov=True,
                                weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / settings.steps)
    generator = torch.Generator(device="cpu").manual_seed(settings.seed)
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    history = []
    try:
        for step in tqdm(range(settings.steps), desc="tuned lens", disable=not progress):
            idx = torch.randint(n_positions, (min(settings.batch, n_positions),), generator=generator)
            idx = idx.to(resid.device)
            logits = lens(model, resid[:, idx].unsqueeze(2))[:, :, 0]  # [depth batch vocab]
            kl = measures.kl_from_logits(final_logits[idx].unsqueeze(0), logits).mean(-1)  # [depth]
            optimizer.zero_grad(set_to_none=True)
            kl.sum().backward()
            with torch.no_grad():
                norms = (lens.A.grad.flatten(1).norm(dim=1) ** 2 + lens.b.grad.norm(dim=1) ** 2).sqrt()
                factor = (settings.clip / norms.clamp_min(1e-12)).clamp(max=1.0)
                lens.A.grad.mul_(factor[:, None, None])
                lens.b.grad.mul_(factor[:, None])
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            schedule.step()
            history += [{"step": step, "depth": d, "kl": float(v), "lr": lr} for d, v in enumerate(kl.tolist())]
    finally:
        for p in frozen:
            p.requires_grad_(True)
    return lens, history


def save_lens(path: str | Path, lens: TunedLens) -> None:
    """The translators as safetensors (``A``, ``b``), written atomically."""
    save_tensors(path, lens.state())


def load_lens(path: str | Path) -> TunedLens:
    return TunedLens.from_state(load_state(path))




def write_history(path: str | Path, history: list[dict]) -> None:
    """The training curve as CSV (:data:`HISTORY_SCHEMA`), atomically."""
    write_csv(path, HISTORY_SCHEMA, {k: [r[k] for r in history] for k in HISTORY_SCHEMA.columns})


def read_history(path: str | Path) -> list[dict]:
    """The rows :func:`write_history` wrote; a file with other columns or damaged is a ValueError naming it."""
    table = read_csv(path, HISTORY_SCHEMA)
    return table.to_pylist()


def training_endpoints(history: list[dict], window: int = 10) -> dict[str, list[float]]:
    """Per depth, the mean training KL over the first and the last ``window`` steps."""
    steps = sorted({r["step"] for r in history})
    first, last = set(steps[:window]), set(steps[-window:])
    depths = sorted({r["depth"] for r in history})

    def mean(sel, d):
        return float(np.mean([r["kl"] for r in history if r["depth"] == d and r["step"] in sel]))

    return {"first_steps_kl": [mean(first, d) for d in depths], "last_steps_kl": [mean(last, d) for d in depths]}
