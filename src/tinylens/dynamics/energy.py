"""Interaction energy of a sequence's token states (method.md §8; source 000 after arXiv 2312.10794).

On the unit sphere the source defines E_beta = 1/(2 beta n^2) sum_ij exp(beta <x_i, x_j>). Real
residual streams are not unit-norm, so each state is normalised first (the inner product becomes
the cosine); with beta = 1 and the 1/(2 beta) factor dropped as source 000 does::

    IE = (1/n^2) sum_i sum_j exp(cos(x_i, x_j))

e when all n states point one way, (e + n - 1)/n when they are orthogonal, about 1 for a uniform
spread on a high-dimensional sphere. Rescaling any state by a positive factor leaves it unchanged.

>>> import torch
>>> round(float(interaction_energy(torch.ones(4, 3))), 6) == round(float(torch.e), 6)
True
"""

from __future__ import annotations

import torch
from torch import Tensor

from tinylens.measures import cosine_matrix


def energy_matrix(states: Tensor) -> Tensor:
    """exp(cos(x_i, x_j)) for every pair: ``[... n d] -> [... n n]`` (float64)."""
    return torch.exp(cosine_matrix(states, states))


def interaction_energy(states: Tensor) -> Tensor:
    """IE over the whole sequence: ``[... n d] -> [...]``."""
    return energy_matrix(states).mean(dim=(-1, -2))


def prefix_interaction_energy(states: Tensor) -> Tensor:
    """The causal check: IE of every prefix x_1..x_t (t = 2..n), averaged over t: ``[... n d] -> [...]``.

    A position sees only its prefix, so this weighs the pairs a causal model can relate; it equals
    :func:`interaction_energy` when every prefix has the whole sequence's energy.
    """
    return interaction_energies(states)[1]


def interaction_energies(states: Tensor) -> tuple[Tensor, Tensor]:
    """(:func:`interaction_energy`, :func:`prefix_interaction_energy`) from one energy matrix."""
    m = energy_matrix(states)
    n = m.shape[-1]
    if n < 2:
        raise ValueError("the prefix interaction energy needs at least two states")
    # Sum of the top-left t x t block: S_t = S_{t-1} + 2 sum_{j<t} M[t, j] + M[t, t].
    lower = torch.tril(m).sum(-1)  # [... n]: sum_{j<=t} M[t, j]
    diagonal = torch.diagonal(m, dim1=-2, dim2=-1)
    block_sums = torch.cumsum(2 * lower - diagonal, dim=-1)
    t = torch.arange(1, n + 1, dtype=m.dtype, device=m.device)
    prefix = (block_sums / t**2)[..., 1:].mean(-1)
    return block_sums[..., -1] / n**2, prefix
