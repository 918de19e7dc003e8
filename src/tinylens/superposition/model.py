"""The toy model of superposition (method.md §11, after Elhage et al. 2022), many models as one tensor.

Each model maps ``features`` sparse inputs through ``hidden`` < ``features``
dimensions and back: ``h = W x``, ``x' = ReLU(W^T h + b)``, with loss
``sum_i I_i (x_i - x'_i)^2`` averaged over the batch. Input feature ``i`` is 0
with probability ``S_i`` (its sparsity) and uniform on [0, 1] otherwise; the
code works with the density ``p_i = 1 - S_i``.

A whole sweep (every setting and seed) is one batch of independent models:
``W`` is ``[models hidden features]``, ``b`` is ``[models features]``, and the
per-model importance and density are ``[models features]``. Adam is
elementwise and the total loss is a sum of per-model losses, so training the
stack is exactly training each model alone; it just costs one set of tensor
operations per step instead of one per model. A run is deterministic given
its seed (one generator for the initial weights and every batch), on the
same device and thread count.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

log = logging.getLogger(__name__)

LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class TrainSettings:
    """How a stack of toy models is trained: Adam, ``steps`` fresh batches of ``batch_size``."""

    steps: int
    batch_size: int
    lr: float
    lr_schedule: str = "cosine"  # cosine: from lr down to lr_floor * lr at the last step
    lr_floor: float = 0.05

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(f"steps and batch_size must be >= 1 and lr > 0, got {self}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")

    def lr_at(self, step: int) -> float:
        if self.lr_schedule == "constant":
            return self.lr
        frac = step / max(self.steps - 1, 1)
        return self.lr * (self.lr_floor + (1 - self.lr_floor) * 0.5 * (1 + math.cos(math.pi * frac)))


@dataclass
class TrainResult:
    W: torch.Tensor  # [models hidden features]
    b: torch.Tensor  # [models features]
    final_loss: torch.Tensor  # [models], mean training loss over the last 5% of steps
    snapshot_steps: list[int]  # steps at which W was recorded (after that many updates)
    snapshots: torch.Tensor | None  # [snapshots models hidden features], or None


def check_settings(importance: torch.Tensor, density: torch.Tensor) -> None:
    if importance.shape != density.shape or importance.ndim != 2:
        raise ValueError(f"importance and density must both be [models features], got "
                         f"{tuple(importance.shape)} and {tuple(density.shape)}")
    if not bool(((density > 0) & (density <= 1)).all()):
        raise ValueError("every feature density (1 - sparsity) must lie in (0, 1]; a sparsity of 1 "
                         "means a feature that is never present")
    if bool((importance < 0).any()):
        raise ValueError("feature importances must be >= 0")


def init_weights(n_models: int, n_hidden: int, n_features: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Xavier-normal ``W`` [models hidden features] and zero ``b`` [models features], as the source did."""
    std = math.sqrt(2.0 / (n_hidden + n_features))
    W = torch.randn(n_models, n_hidden, n_features, generator=generator) * std
    return W, torch.zeros(n_models, n_features)


def sample_features(density: torch.Tensor, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """x [models batch features]: 0 with probability 1 - p, else uniform on [0, 1].

    One uniform draw u per entry does both: the feature is present when
    u < p, and then u / p is uniform on [0, 1).
    """
    p = density[:, None, :]
    u = torch.rand(density.shape[0], batch_size, density.shape[1], generator=generator, device=density.device)
    return torch.where(u < p, u / p, torch.zeros((), device=density.device))


def reconstruct(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """x' = ReLU(W^T W x + b) for every model: x [models batch features] -> [models batch features]."""
    h = torch.bmm(x, W.transpose(1, 2))  # [models batch hidden]
    return torch.relu(torch.bmm(h, W) + b[:, None, :])


def batch_loss(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor, importance: torch.Tensor) -> torch.Tensor:
    """Importance-weighted squared error, summed over features, mean over the batch: [models]."""
    err = (x - reconstruct(W, b, x)) ** 2
    return (err * importance[:, None, :]).sum(-1).mean(-1)


def loss_and_grads(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor, importance: torch.Tensor,
                   with_loss: bool = True) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """:func:`batch_loss` [models] and its gradients with respect to W and b, written out by hand.

    With h = x W^T, z = h W + b, x' = ReLU(z) and G = dL/dz = (2 / batch) I (x' - x) [z > 0]:
    dL/db = sum over the batch of G, and dL/dW = h^T G + W G^T x (W enters twice).
    The same numbers as autograd (tests/test_superposition.py), without its per-step overhead.
    """
    h = torch.bmm(x, W.transpose(1, 2))  # [models batch hidden]
    z = torch.baddbmm(b[:, None, :], h, W)  # [models batch features]
    out = torch.relu(z)
    diff = out - x
    weighted = diff * importance[:, None, :]
    loss = (weighted * diff).sum(-1).mean(-1) if with_loss else None
    G = torch.where(z > 0, weighted, torch.zeros((), device=z.device)) * (2.0 / x.shape[1])
    grad_b = G.sum(1)
    grad_W = torch.bmm(h.transpose(1, 2), G) + torch.bmm(torch.bmm(W, G.transpose(1, 2)), x)
    return loss, grad_W, grad_b


class Adam:
    """Adam (Kingma & Ba; torch.optim.Adam's defaults) on a list of tensors updated in place.

    Elementwise, so every model in a stack is optimised exactly as if alone.
    (Kept here rather than torch.optim.Adam, whose import pulls in the
    compiler stack and costs seconds per job.)
    """

    def __init__(self, params: Sequence[torch.Tensor], betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params = list(params)
        self.betas, self.eps, self.t = betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor], lr: float) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (v / c2).sqrt_().add_(self.eps)
            p.addcdiv_(m, denom, value=-lr / c1)


def train(importance: torch.Tensor, density: torch.Tensor | None, n_hidden: int, settings: TrainSettings, seed: int,
          init: tuple[torch.Tensor, torch.Tensor] | None = None, snapshot_steps: Sequence[int] = (),
          device: torch.device | str = "cpu", progress: bool = False, desc: str = "toy models",
          sampler: Callable[[int, torch.Generator], torch.Tensor] | None = None) -> TrainResult:
    """Train one stack of toy models, one per row of ``importance`` / ``density`` [models features].

    ``init`` gives starting (W, b) (for starts that favour one geometry);
    otherwise Xavier-normal from ``seed``. ``snapshot_steps`` lists the steps
    (0 = before training, ``settings.steps`` = the end) at which W is kept.
    ``sampler(batch_size, generator)`` draws the batches [models batch features]
    instead of independent features of ``density`` (which may then be None),
    for inputs whose features are not independent (correlated.py).
    """
    if sampler is None:
        check_settings(importance, density)
    elif bool((importance < 0).any()):
        raise ValueError("feature importances must be >= 0")
    n_models, n_features = importance.shape
    gen = torch.Generator(device="cpu").manual_seed(seed)
    if init is None:
        W, b = init_weights(n_models, n_hidden, n_features, gen)
    else:
        W, b = (t.detach().clone().float() for t in init)
        if W.shape != (n_models, n_hidden, n_features) or b.shape != (n_models, n_features):
            raise ValueError(f"init shapes {tuple(W.shape)}, {tuple(b.shape)} do not match "
                             f"[{n_models} {n_hidden} {n_features}] and [{n_models} {n_features}]")
    wanted = sorted(set(int(s) for s in snapshot_steps))
    if any(not 0 <= s <= settings.steps for s in wanted):
        raise ValueError(f"snapshot steps must lie in 0..{settings.steps}, got {wanted}")
    device = torch.device(device)
    if device.type != "cpu":
        gen = torch.Generator(device=device).manual_seed(seed)  # batches drawn where they are used
    W, b = W.to(device).contiguous(), b.to(device).contiguous()
    importance = importance.to(device).float()
    if sampler is None:
        density = density.to(device).float()
        sampler = lambda batch, g: sample_features(density, batch, g)  # noqa: E731
    opt = Adam([W, b])
    snaps = [W.cpu().clone()] if wanted and wanted[0] == 0 else []
    wanted_set = set(wanted)
    tail = max(1, settings.steps // 20)
    tail_loss = torch.zeros(n_models, device=device, dtype=torch.float64)
    with torch.no_grad():
        for step in tqdm(range(settings.steps), disable=not progress, desc=desc, unit="step", mininterval=5):
            x = sampler(settings.batch_size, gen)
            in_tail = step >= settings.steps - tail
            loss, grad_W, grad_b = loss_and_grads(W, b, x, importance, with_loss=in_tail)
            opt.step([grad_W, grad_b], settings.lr_at(step))
            if in_tail:
                tail_loss += loss
            if step + 1 in wanted_set:
                snaps.append(W.cpu().clone())
    return TrainResult(
        W=W.cpu(), b=b.cpu(), final_loss=(tail_loss / tail).float().cpu(),
        snapshot_steps=wanted, snapshots=torch.stack(snaps) if snaps else None,
    )


def expected_loss(W: torch.Tensor, b: torch.Tensor, importance: torch.Tensor, density: torch.Tensor,
                  points: int = 4096, max_features: int = 12) -> torch.Tensor:
    """The expected loss of each model [models], stratified over which features are present.

    Every subset A of features is present with probability
    prod_{i in A} p_i prod_{i not in A} (1 - p_i); within a subset the
    present values are integrated with ``points`` scrambled-Sobol points,
    the same points for every model (common random numbers, so the losses
    of two models are compared with far less noise than independent
    batches give). Rare subsets (several features at once under high
    sparsity) get as many points as common ones. Exact in the limit of
    many points; for ``features`` <= ``max_features`` (2^features subsets).
    """
    check_settings(importance, density)
    n_models, n = importance.shape
    if n > max_features:
        raise ValueError(f"expected_loss enumerates 2^features subsets; {n} features is too many "
                         f"(at most {max_features}); estimate the loss from a large batch instead")
    sobol = torch.quasirandom.SobolEngine(n, scramble=True, seed=0).draw(points)  # [points features]
    total = torch.zeros(n_models, dtype=torch.float64)
    W, b = W.float(), b.float()
    for present in itertools.product((0, 1), repeat=n):
        mask = torch.tensor(present, dtype=torch.float32)
        prob = torch.where(mask.bool(), density.double(), 1 - density.double()).prod(-1)  # [models]
        x = (sobol * mask).expand(n_models, points, n)
        err = ((x - reconstruct(W, b, x)) ** 2 * importance[:, None, :]).sum(-1).mean(-1)
        total += prob * err.double()
    return total.float()
