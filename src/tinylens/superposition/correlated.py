"""Toy models whose features come in correlated or anti-correlated groups (method.md §11, after Elhage et al.
2022, "Toy Models of Superposition", the section on correlated features).

A setting splits its features into ``groups`` groups of ``size`` features of one ``kind``:

- correlated: the group is on with probability p = 1 - S, and then every feature of the group is on, each
  with its own value uniform on [0, 1]; off, all are 0;
- anticorrelated: the group is on with probability p, and then exactly one of its features (chosen
  uniformly) is on, with a value uniform on [0, 1]: at most one feature of the group is ever on;
- independent: every feature on with probability p on its own (the uniform toy model; a group of one).

Groups are independent of each other. Several settings, each with many seeds, train as one stack: a
setting with fewer features than the largest is padded with features that are never on and have importance
0 (their columns get no gradient and are dropped before any measure).

The measures: the cosine between the columns W_i, W_j of two represented features, by the pair's type
(same correlated group, same anti-correlated group, different groups), read as orthogonal (|cos| <
``ORTHOGONAL_COS``), antipodal (cos < -``ALIGNED_COS``) or aligned (cos > ``ALIGNED_COS``); and, per
correlated group, the share of its columns' squared length along their first principal direction (the
group's W_g = [hidden size]: sigma_1^2 / sum sigma_k^2): 1 when the group has collapsed onto one direction
(its principal component), 1 / min(hidden, size) when its columns are orthogonal and of equal length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    import torch

KINDS = ("correlated", "anticorrelated", "independent")
PAIR_TYPES = ("same correlated group", "same anticorrelated group", "different groups")
ORTHOGONAL_COS = 0.2  # |cos| below this: orthogonal (within about 12 degrees of 90)
ALIGNED_COS = 0.8  # cos beyond +-this: aligned / antipodal (within about 37 degrees)


@dataclass(frozen=True)
class Setting:
    """One arrangement of features: ``groups`` groups of ``size`` features of one ``kind``, every group
    off with probability ``sparsity``."""

    name: str
    groups: int
    size: int
    kind: str
    sparsity: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.groups < 1 or self.size < 1:
            raise ValueError(f"setting {self.name!r}: groups and size must be >= 1, got {self.groups}, {self.size}")
        if not 0 <= self.sparsity < 1:
            raise ValueError(f"setting {self.name!r}: sparsity must lie in [0, 1), got {self.sparsity}")

    @property
    def features(self) -> int:
        return self.groups * self.size

    def group_of(self) -> np.ndarray:
        """The group of each feature [features]: features 0..size-1 are group 0, and so on."""
        return np.repeat(np.arange(self.groups), self.size)


def settings_from_config(spec: Mapping[str, Mapping]) -> list[Setting]:
    """Settings from a config mapping name -> {groups, size, kind, sparsity}."""
    return [Setting(name, int(v["groups"]), int(v["size"]), str(v["kind"]), float(v["sparsity"]))
            for name, v in spec.items()]


@dataclass
class Layout:
    """Every model of a stack: its group per feature (-1 for padding) and the kind and size of each group."""

    group_of: torch.Tensor  # [models features] int64, -1 for a padding feature
    position: torch.Tensor  # [models features] int64: the feature's place within its group
    group_kind: torch.Tensor  # [models groups] int64, index into KINDS (padding groups: independent)
    group_size: torch.Tensor  # [models groups] int64 (padding groups: 1)
    group_density: torch.Tensor  # [models groups] float: probability the group is on (padding: 0)

    @property
    def feature_group(self) -> torch.Tensor:
        return self.group_of.clamp_min(0)

    @property
    def anti_group(self) -> torch.Tensor:
        return self.group_kind == KINDS.index("anticorrelated")

    @property
    def real(self) -> torch.Tensor:
        return self.group_of >= 0


def layout(settings: Sequence[Setting], seeds: int) -> Layout:
    """The layout of a stack of ``seeds`` models per setting (setting-major)."""
    import torch
    n = max(s.features for s in settings)
    G = n  # at most one group per feature
    rows = []
    for s in settings:
        group_of = np.full(n, -1)
        position = np.zeros(n, dtype=int)
        group_of[: s.features] = s.group_of()
        position[: s.features] = np.tile(np.arange(s.size), s.groups)
        kind = np.full(G, KINDS.index("independent"))
        kind[: s.groups] = KINDS.index(s.kind)
        size = np.ones(G, dtype=int)
        size[: s.groups] = s.size
        dens = np.zeros(G)
        dens[: s.groups] = 1 - s.sparsity
        rows.append((group_of, position, kind, size, dens))
    cols = [np.repeat(np.stack(c), seeds, axis=0) for c in zip(*rows)]
    return Layout(*(torch.tensor(c) for c in cols[:4]), group_density=torch.tensor(cols[4], dtype=torch.float32))


def sample_grouped(lay: Layout, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """x [models batch features] for the groups of ``lay``.

    One uniform u per group and example does both draws: the group is on
    when u < p, and then floor(u / p x size) (uniform over the members)
    is the one member an anti-correlated group lets on; a correlated
    group lets every member on. One more uniform per feature is its value.
    """
    import torch
    device = generator.device
    M, n = lay.group_of.shape
    G = lay.group_kind.shape[1]
    p = lay.group_density.to(device)[:, None, :]  # [models 1 groups]
    u = torch.rand(M, batch_size, G, generator=generator, device=device)
    # per group: -1 when off; else the member let on (anti-correlated) or -2 (correlated: all of them)
    member = torch.where(u < p, (u / p.clamp_min(1e-12) * lay.group_size.to(device)[:, None, :]).long(),
                         torch.full((), -1, device=device))
    member = torch.where((u < p) & ~lay.anti_group.to(device)[:, None, :], torch.full((), -2, device=device), member)
    values = torch.rand(M, batch_size, n, generator=generator, device=device)
    per_feature = torch.gather(member, 2, lay.feature_group.to(device)[:, None, :].expand(M, batch_size, n))
    present = (per_feature == -2) | (per_feature == lay.position.to(device)[:, None, :])
    present &= lay.real.to(device)[:, None, :]
    return torch.where(present, values, torch.zeros((), device=device))


def pair_cosines(W: np.ndarray) -> np.ndarray:
    """cos(W_i, W_j) [... features features] of the columns of W [... hidden features] (0 for a zero column)."""
    W = np.asarray(W, dtype=float)
    norms = np.linalg.norm(W, axis=-2)
    unit = W / np.where(norms > 0, norms, 1.0)[..., None, :]
    return np.swapaxes(unit, -1, -2) @ unit


def pair_type(setting: Setting, i: int, j: int) -> str:
    """The type of the pair of features (i, j) of a setting: one of PAIR_TYPES."""
    g = setting.group_of()
    if g[i] != g[j] or setting.kind == "independent":
        return "different groups"
    return "same correlated group" if setting.kind == "correlated" else "same anticorrelated group"


def relation(cos: np.ndarray) -> np.ndarray:
    """Each cosine read as 'antipodal', 'orthogonal', 'aligned' or 'other'."""
    cos = np.asarray(cos, dtype=float)
    return np.select([cos < -ALIGNED_COS, np.abs(cos) < ORTHOGONAL_COS, cos > ALIGNED_COS],
                     ["antipodal", "orthogonal", "aligned"], "other")


def principal_share(Wg: np.ndarray) -> np.ndarray:
    """sigma_1^2 / sum sigma_k^2 of a group's columns Wg [... hidden size]: 1 = collapsed onto one direction."""
    s = np.linalg.svd(np.asarray(Wg, dtype=float), compute_uv=False)
    total = (s**2).sum(-1)
    return np.where(total > 0, s[..., 0] ** 2 / np.where(total > 0, total, 1.0), np.nan)
