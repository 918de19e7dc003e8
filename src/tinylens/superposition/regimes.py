"""The n = 2, m = 1 phase diagram: which regime the extra feature lands in, trained and analytic.

Feature 0 has importance 1, feature 1 (the "extra" feature) relative
importance r; both have density p = 1 - S. With one hidden dimension the
extra feature is either not represented, given the dimension for itself
(feature 0 dropped), or stored in superposition with feature 0 (the two
columns antipodal). method.md §11.

Analytic side: the best expected loss within each configuration.
- not represented: W = [1, 0] reconstructs feature 0 exactly; the best
  constant output for feature 1 is its mean p/2 (through the bias), leaving
  its variance: L = r (p/3 - p^2/4).
- dedicated dimension: the mirror image, L = p/3 - p^2/4.
- superposition: W = [a, -c] with biases; its exact expected loss (every
  presence pattern, values integrated by the midpoint rule) is minimised
  over (a, c, b_0, b_1) by damped Newton from the symmetric start
  a = c = 1, b = 0 (where it is p^2 (1 + r) / 6 in closed form).
The analytic regime is the configuration with the lowest loss; for each r,
superposition wins below one density p*(r), found by bisection
(:func:`analytic_boundary`). Swapping the features maps r to 1/r, so
p*(r) = p*(1/r).
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from tinylens.superposition.geometry import REPRESENTED_NORM, feature_norms

REGIMES = ("not represented", "dedicated dimension", "superposition", "rotated, no superposition")
NOT_REPRESENTED, DEDICATED, SUPERPOSITION, ROTATED = range(4)


def classify_regime(W: torch.Tensor, extra: int = -1, threshold: float = REPRESENTED_NORM,
                    cos_tol: float = 0.2, excess: float = 0.5) -> torch.Tensor:
    """Regime code (index into REGIMES) of feature ``extra`` for each model, W [... hidden features].

    - not represented: its column is shorter than ``threshold``;
    - dedicated dimension: represented and orthogonal (|cos| <= ``cos_tol``)
      to every other represented column;
    - superposition: represented, sharing a direction with another
      represented column, and the model stores more than its dimensions'
      worth, ||W||_F^2 > hidden + ``excess`` (antipodal unit columns in one
      dimension: 2);
    - rotated, no superposition: it shares a direction but ||W||_F^2 stays
      at the hidden size. With dense features of equal importance the best
      linear solution can point anywhere in feature space (W = [0.7, 0.7]
      loses as little as [1, 0]); that is not superposition.
    """
    norms = feature_norms(W)  # [... features]
    n = W.shape[-1]
    extra = extra % n
    unit = W / norms.clamp_min(1e-12)[..., None, :]
    cos = (unit[..., :, extra, None] * unit).sum(-2).abs()  # [... features]: |cos(W_extra, W_j)|
    others = (norms > threshold) & (torch.arange(n) != extra)
    shared = ((cos > cos_tol) & others).any(-1)
    beyond_capacity = (W**2).sum((-2, -1)) > W.shape[-2] + excess
    code = torch.full(norms.shape[:-1], DEDICATED, dtype=torch.long)
    code[shared & beyond_capacity] = SUPERPOSITION
    code[shared & ~beyond_capacity] = ROTATED
    code[norms[..., extra] <= threshold] = NOT_REPRESENTED
    return code


def pair_settings(importance: np.ndarray, density: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model importance and density [models 2] for relative importances r and densities p (1-D, same length)."""
    r = torch.as_tensor(importance, dtype=torch.float32)
    p = torch.as_tensor(density, dtype=torch.float32)
    return torch.stack([torch.ones_like(r), r], -1), torch.stack([p, p], -1)


def antipodal_pair_loss(theta: torch.Tensor, r: torch.Tensor, p: torch.Tensor, quad: int = 96) -> torch.Tensor:
    """Expected loss [cells] of W = [a, -c], b = (b0, b1) with theta = (log a, log c, b0, b1) [cells 4].

    Sums the four presence patterns weighted by their probabilities; the
    present values are integrated with the midpoint rule (``quad`` points per
    axis; the integrand is continuous with kinks, so the error falls as
    1/quad^2). Float64 throughout.
    """
    a, c = theta[:, 0].exp(), theta[:, 1].exp()
    b0, b1 = theta[:, 2:3], theta[:, 3:4]
    t = ((torch.arange(quad, dtype=torch.float64) + 0.5) / quad)[None, :]  # [1 quad]
    aa, cc, ac = (a * a)[:, None], (c * c)[:, None], (a * c)[:, None]
    none = torch.relu(b0[:, 0]) ** 2 + r * torch.relu(b1[:, 0]) ** 2
    only0 = ((t - torch.relu(aa * t + b0)) ** 2 + r[:, None] * torch.relu(b1 - ac * t) ** 2).mean(1)
    only1 = (torch.relu(b0 - ac * t) ** 2 + r[:, None] * (t - torch.relu(cc * t + b1)) ** 2).mean(1)
    x0, x1 = t[:, :, None], t[:, None, :]  # [1 quad 1], [1 1 quad]
    aa, cc, ac, b0, b1 = (v[:, :, None] for v in (aa, cc, ac, b0, b1))
    both = ((x0 - torch.relu(aa * x0 - ac * x1 + b0)) ** 2
            + r[:, None, None] * (x1 - torch.relu(cc * x1 - ac * x0 + b1)) ** 2).mean((1, 2))
    return (1 - p) ** 2 * none + p * (1 - p) * (only0 + only1) + p**2 * both


def _newton_minimise(f, theta: torch.Tensor, iters: int, progress: bool = False) -> torch.Tensor:
    """Minimise a sum of independent per-cell losses f(theta) [cells] over theta [cells k].

    Damped Newton (Levenberg-Marquardt) per cell: exact gradient and Hessian
    by autograd, a step accepted only if it lowers that cell's loss.
    """
    theta = theta.clone()
    cells, k = theta.shape
    lam = torch.full((cells,), 1e-3, dtype=theta.dtype)
    eye = torch.eye(k, dtype=theta.dtype)
    for _ in tqdm(range(iters), disable=not progress, desc="analytic superposition loss", mininterval=5):
        th = theta.detach().requires_grad_(True)
        loss = f(th)
        (g,) = torch.autograd.grad(loss.sum(), th, create_graph=True)
        H = torch.stack([torch.autograd.grad(g[:, i].sum(), th, retain_graph=i < k - 1)[0] for i in range(k)], 1)
        with torch.no_grad():
            H = 0.5 * (H + H.transpose(1, 2))
            # make the damped Hessian positive definite: shift by its most negative eigenvalue if any
            low = torch.linalg.eigvalsh(H)[:, 0].clamp(max=0)
            step = torch.linalg.solve(H + (lam - 1.01 * low)[:, None, None] * eye, g.detach())
            trial = theta - step
            better = f(trial) < loss.detach()
            theta = torch.where(better[:, None], trial, theta)
            lam = torch.where(better, lam / 3, lam * 4).clamp(1e-9, 1e6)
    return theta


def unrepresented_losses(importance: np.ndarray, density: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best loss with the extra feature not represented, and with it given the dimension: r v, v.

    v = p/3 - p^2/4 is the variance of a feature (present with probability
    p, then uniform on [0, 1]): the loss left when the best constant (its
    mean p/2, through the bias) stands in for it.
    """
    r, p = np.asarray(importance, dtype=float), np.asarray(density, dtype=float)
    var = p / 3 - p**2 / 4
    return r * var, var


#: Superposition must beat the other configurations by this relative margin: the midpoint rule
#: biases its loss low by ~1/(4 quad^2), and at r = 1, p = 1 the pair ties exactly with them.
WIN_MARGIN = 1e-3


def _superposition_wins(r: torch.Tensor, p: torch.Tensor, theta: torch.Tensor, iters: int,
                        quad: int, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Optimise the antipodal pair from ``theta``; True where both columns stay represented and it
    beats both other configurations (by WIN_MARGIN). Also returns the optimised parameters."""
    theta = _newton_minimise(lambda th: antipodal_pair_loss(th, r, p, quad), theta, iters)
    with torch.no_grad():
        sup = antipodal_pair_loss(theta, r, p, quad)
    not_rep, dedicated = unrepresented_losses(r.numpy(), p.numpy())
    best_other = torch.as_tensor(np.minimum(not_rep, dedicated))
    return (sup < best_other * (1 - WIN_MARGIN)) & (theta[:, :2].exp().min(1).values > threshold), theta


def analytic_boundary(importance: np.ndarray, density_range: tuple[float, float], bisections: int = 16,
                      iters: int = 12, quad: int = 64, threshold: float = REPRESENTED_NORM,
                      progress: bool = False) -> np.ndarray:
    """The density p*(r) below which superposition is the best configuration, for each importance r.

    Bisection in log p inside ``density_range``; at every trial density the
    antipodal pair is optimised (damped Newton) from the last parameters that
    were still in superposition, so the branch is followed continuously.
    "Superposition" means what the trained-model classifier means: both
    columns longer than ``threshold``, and the lowest loss of the three.
    NaN where superposition wins over the whole range or nowhere in it.
    """
    r = torch.as_tensor(np.asarray(importance, dtype=float))
    lo = torch.full_like(r, float(np.log(density_range[0])))
    hi = torch.full_like(r, float(np.log(density_range[1])))
    theta = torch.zeros(len(r), 4, dtype=torch.float64)
    at_lo, theta = _superposition_wins(r, lo.exp(), theta, 3 * iters, quad, threshold)
    at_hi, _ = _superposition_wins(r, hi.exp(), theta, 3 * iters, quad, threshold)
    for _ in tqdm(range(bisections), disable=not progress, desc="analytic boundary", mininterval=5):
        mid = (lo + hi) / 2
        wins, trial = _superposition_wins(r, mid.exp(), theta, iters, quad, threshold)
        lo, hi = torch.where(wins, mid, lo), torch.where(wins, hi, mid)
        theta = torch.where(wins[:, None], trial, theta)
    out = ((lo + hi) / 2).exp().numpy()
    out[~at_lo.numpy() | at_hi.numpy()] = np.nan
    return out


def analytic_regime(importance: np.ndarray, density: np.ndarray, boundary: np.ndarray) -> np.ndarray:
    """Regime codes of cells (r, p) given each cell's p*(r): superposition below it, else the more
    important feature keeps the dimension (not represented for r < 1, dedicated for r > 1)."""
    r, p = np.asarray(importance, dtype=float), np.asarray(density, dtype=float)
    code = np.where(r > 1, DEDICATED, NOT_REPRESENTED)
    return np.where(p < np.asarray(boundary, dtype=float), SUPERPOSITION, code)


def boundary_from_cells(density: np.ndarray, regime: np.ndarray) -> float:
    """Density below which one importance row of trained cells is in superposition: the geometric
    midpoint between the densest superposition cell and the next denser cell; NaN if the row never
    or always is.

    density: one row's densities, increasing; regime: their regime codes.
    """
    density = np.asarray(density, dtype=float)
    if np.any(np.diff(density) <= 0):
        raise ValueError("densities of a row must increase")
    sup = np.flatnonzero(np.asarray(regime) == SUPERPOSITION)
    if len(sup) == 0 or sup.max() == len(density) - 1:
        return float("nan")
    i = sup.max()
    return float(np.sqrt(density[i] * density[i + 1]))
