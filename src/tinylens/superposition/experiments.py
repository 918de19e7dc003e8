"""The four experiments of the superposition family, each one batched stack of toy models, and their tables.

Every ``run_*`` function takes plain values (the rule passes them from the
preset), trains one stack (every setting and seed at once), and returns
the columns of its Parquet tables (schemas.py); summary.py turns those
tables into ``metrics/superposition.json``. method.md §11; Elhage et al. (2022).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import torch

from tinylens.superposition.correlated import layout as correlated_layout
from tinylens.superposition.correlated import (
    pair_cosines,
    pair_type,
    principal_share,
    relation,
    sample_grouped,
    settings_from_config,
)
from tinylens.superposition.dynamics import find_jumps
from tinylens.superposition.geometry import (
    REPRESENTED_NORM,
    column_angles,
    dimensions_per_feature,
    feature_dimensionality,
    feature_norms,
    polygon_name,
)
from tinylens.superposition.levels import nearest_fraction
from tinylens.superposition.model import TrainSettings, expected_loss, init_weights, train
from tinylens.superposition.phase_change import STARTS, start_weights
from tinylens.superposition.regimes import (
    REGIMES,
    analytic_boundary,
    analytic_regime,
    boundary_from_cells,
    classify_regime,
    pair_settings,
)
from tinylens.superposition.schemas import DIMENSIONALITY_JUMPS

log = logging.getLogger(__name__)

def log_grid(spec: Mapping[str, float]) -> np.ndarray:
    """``count`` values spaced evenly in log from ``min`` to ``max`` (a config entry {min, max, count})."""
    lo, hi, n = float(spec["min"]), float(spec["max"]), int(spec["count"])
    if not 0 < lo < hi or n < 2:
        raise ValueError(f"a log grid needs 0 < min < max and count >= 2, got {dict(spec)}")
    return np.logspace(np.log10(lo), np.log10(hi), n)


def train_settings(spec: Mapping) -> TrainSettings:
    """TrainSettings from a sweep's config entry (steps, batch_size, lr; lr_schedule optional)."""
    return TrainSettings(steps=int(spec["steps"]), batch_size=int(spec["batch_size"]), lr=float(spec["lr"]),
                         lr_schedule=spec.get("lr_schedule", "cosine"))


def _feature_rows(W: torch.Tensor, b: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-(model, feature) columns of a 2-D stack: w, norm, angle, D_i, bias (model-major order)."""
    n_models, _, n = W.shape
    return {
        "feature": np.tile(np.arange(n), n_models),
        "w": W.transpose(1, 2).reshape(-1, 2).numpy().astype(np.float32),
        "norm": feature_norms(W).reshape(-1).numpy().astype(np.float32),
        "dimensionality": feature_dimensionality(W).reshape(-1).numpy().astype(np.float32),
        "bias": b.reshape(-1).numpy().astype(np.float32),
    }


def run_uniform(features: int, sparsities: Sequence[float], seeds: int, importance_decay: float, train_spec: Mapping,
                seed: int, threshold: float = REPRESENTED_NORM, device="cpu", progress: bool = False) -> dict:
    """n features in 2 dimensions, every feature with one sparsity; ``seeds`` models per sparsity."""
    S = np.repeat(np.asarray(sparsities, dtype=float), seeds)
    seed_ids = np.tile(np.arange(seeds), len(sparsities))
    density = torch.tensor(1 - S, dtype=torch.float32)[:, None].expand(-1, features).contiguous()
    importance = (importance_decay ** torch.arange(features, dtype=torch.float32)).expand(len(S), -1).contiguous()
    res = train(importance, density, 2, train_settings(train_spec), seed, device=device, progress=progress,
                desc="uniform sweep")
    loss = expected_loss(res.W, res.b, importance, density).double().numpy()
    names = [polygon_name(w, threshold) for w in res.W.numpy()]
    feats = _feature_rows(res.W, res.b)
    models = {"sparsity": S, "seed": seed_ids, "loss": loss, "train_loss": res.final_loss.double().numpy(),
              "n_represented": np.array([k for _, k in names]), "polygon": [name for name, _ in names]}
    feats.update(sparsity=np.repeat(S, features), seed=np.repeat(seed_ids, features),
                 angle_deg=column_angles(res.W).reshape(-1).numpy().astype(np.float32))
    return {"models": models, "features": feats}


def run_nonuniform(fixed_sparsity: float, relative_density: Sequence[float], random_seeds: int, train_spec: Mapping,
                   seed: int, threshold: float = REPRESENTED_NORM, device="cpu", progress: bool = False) -> dict:
    """Five features in 2 dimensions; features 0-3 at ``fixed_sparsity``, feature 4 (the odd one) at
    density ``relative_density`` x theirs. Each odd density is trained from the pentagon start, the
    two-digon start, and ``random_seeds`` random starts, all in one stack."""
    odd = 4
    rel = np.sort(np.asarray(relative_density, dtype=float))
    p_fixed = 1 - fixed_sparsity
    p_odd = np.clip(rel * p_fixed, None, 1.0)
    starts = [*STARTS] + ["random"] * random_seeds
    K = len(rel)
    dens = torch.full((K, 5), p_fixed, dtype=torch.float32)
    dens[:, odd] = torch.tensor(p_odd, dtype=torch.float32)
    density = dens.repeat(len(starts), 1)
    importance = torch.ones_like(density)
    gen = torch.Generator().manual_seed(seed + 1)
    Ws, bs = [], []
    for start in starts:
        if start == "random":
            W0, b0 = init_weights(K, 2, 5, gen)
        else:
            W0, b0 = start_weights(start, K, odd=odd)
        Ws.append(W0)
        bs.append(b0)
    res = train(importance, density, 2, train_settings(train_spec), seed, init=(torch.cat(Ws), torch.cat(bs)),
                device=device, progress=progress, desc="non-uniform sweep")
    loss = expected_loss(res.W, res.b, importance, density, points=8192).double().numpy()
    names = [polygon_name(w, threshold) for w in res.W.numpy()]
    odd_norm = feature_norms(res.W)[:, odd].numpy()
    start_col = np.repeat(starts, K)
    seed_col = np.concatenate([np.zeros(2 * K, dtype=int), np.repeat(np.arange(random_seeds), K)]).astype(int)
    kept = np.array([(s == "pentagon" and k == 5) or (s == "two digons" and k == 4 and o <= threshold)
                     for s, (_, k), o in zip(start_col, names, odd_norm)])
    models = {"odd_density": np.tile(p_odd, len(starts)), "relative_density": np.tile(rel, len(starts)),
              "start": list(start_col), "seed": seed_col, "loss": loss,
              "train_loss": res.final_loss.double().numpy(), "n_represented": np.array([k for _, k in names]),
              "polygon": [n for n, _ in names], "odd_norm": odd_norm.astype(np.float32), "kept_start_geometry": kept}
    feats = _feature_rows(res.W, res.b)
    feats.update(odd_density=np.repeat(models["odd_density"], 5), start=list(np.repeat(start_col, 5)),
                 seed=np.repeat(seed_col, 5))
    return {"models": models, "features": feats}


def run_dimensionality(features: int, hidden: int, sparsities: Sequence[float], train_spec: Mapping, snapshots: int,
                       fractions: Sequence[Fraction], tolerance: float, jump_levels: Sequence[Fraction],
                       jumps: Mapping[str, float], seed: int, threshold: float = REPRESENTED_NORM, device="cpu",
                       progress: bool = False) -> dict:
    """n features in m dimensions, equal importance, one model per sparsity; W kept at ``snapshots``
    evenly spaced steps for the jumps of D_i over training (``jumps``: tolerance, min_dwell, smooth,
    max_transition, margin of :func:`tinylens.superposition.dynamics.find_jumps`); every move between
    plateaus is kept, ``exceeds_noise`` telling the jumps from the moves within the curve's noise."""
    S = np.asarray(sparsities, dtype=float)
    density = torch.tensor(1 - S, dtype=torch.float32)[:, None].expand(-1, features).contiguous()
    settings = train_settings(train_spec)
    snap_steps = np.unique(np.linspace(0, settings.steps, snapshots + 1).round().astype(int))
    res = train(torch.ones_like(density), density, hidden, settings, seed, snapshot_steps=snap_steps,
                device=device, progress=progress, desc="dimensionality sweep")
    D = feature_dimensionality(res.W).numpy()  # [models features]
    norms = feature_norms(res.W).numpy()
    idx, dist = nearest_fraction(D, fractions)
    models = {"sparsity": S, "train_loss": res.final_loss.double().numpy(),
              "dims_per_feature": dimensions_per_feature(res.W).numpy(),
              "n_represented": (norms > threshold).sum(1)}
    feats = {"sparsity": np.repeat(S, features), "feature": np.tile(np.arange(features), len(S)),
             "norm": norms.reshape(-1).astype(np.float32), "dimensionality": D.reshape(-1).astype(np.float32),
             "nearest_fraction": [str(fractions[i]) for i in idx.reshape(-1)],
             "distance": dist.reshape(-1).astype(np.float32)}
    traj_D = feature_dimensionality(res.snapshots).numpy()  # [snapshots models features]
    traj_norm = feature_norms(res.snapshots).numpy()
    T = len(res.snapshot_steps)
    training = {"sparsity": np.repeat(S, T * features),
                "step": np.tile(np.repeat(res.snapshot_steps, features), len(S)),
                "feature": np.tile(np.arange(features), len(S) * T),
                "norm": traj_norm.transpose(1, 0, 2).reshape(-1).astype(np.float32),
                "dimensionality": traj_D.transpose(1, 0, 2).reshape(-1).astype(np.float32)}
    found = {k: [] for k in DIMENSIONALITY_JUMPS.columns}
    for k, s in enumerate(S):
        for j in find_jumps(res.snapshot_steps, traj_D[:, k], jump_levels, jumps["tolerance"], jumps["min_dwell"],
                            jumps["smooth"], jumps["max_transition"], margin=jumps["margin"], keep_small=True):
            for key, value in (("sparsity", s), ("feature", j.feature), ("step", j.step),
                               ("from_fraction", str(j.from_fraction)), ("to_fraction", str(j.to_fraction)),
                               ("left_step", j.left_step), ("arrive_step", j.arrive_step), ("noise", j.noise),
                               ("size_over_noise", j.size_over_noise), ("exceeds_noise", j.exceeds_noise)):
                found[key].append(value)
    return {"models": models, "features": feats, "training": training, "jumps": found}


def run_phase_diagram(importance: Sequence[float], density: Sequence[float], seeds: int, train_spec: Mapping,
                      seed: int, analytic_rows: int, threshold: float = REPRESENTED_NORM, device="cpu",
                      progress: bool = False) -> dict:
    """n = 2, m = 1 over the grid importance x density, ``seeds`` models per cell, and the analytic regimes."""
    r = np.sort(np.asarray(importance, dtype=float))
    p = np.sort(np.asarray(density, dtype=float))
    R, P = np.meshgrid(r, p, indexing="ij")  # [rows cols]: rows are importances
    cells_r, cells_p = R.ravel(), P.ravel()
    imp, dens = pair_settings(np.repeat(cells_r, seeds), np.repeat(cells_p, seeds))
    res = train(imp, dens, 1, train_settings(train_spec), seed, device=device, progress=progress, desc="phase diagram")
    loss = expected_loss(res.W, res.b, imp, dens).double().numpy()
    regime = classify_regime(res.W, threshold=threshold).numpy()
    best = loss.reshape(-1, seeds).argmin(1)
    trained = regime.reshape(-1, seeds)[np.arange(len(cells_r)), best]
    # the analytic boundary at every trained row and on a finer set of rows for the figure's curve
    rows = np.unique(np.concatenate([r, np.logspace(np.log10(r[0]), np.log10(r[-1]), analytic_rows)]))
    p_star = analytic_boundary(rows, (float(p[0]), float(p[-1])), progress=progress)
    cell_star = p_star[np.searchsorted(rows, cells_r)]
    analytic = analytic_regime(cells_r, cells_p, cell_star)
    trained_rows = {float(ri): boundary_from_cells(p, trained.reshape(R.shape)[i]) for i, ri in enumerate(r)}
    models = {"importance": np.repeat(cells_r, seeds), "density": np.repeat(cells_p, seeds),
              "seed": np.tile(np.arange(seeds), len(cells_r)), "loss": loss, "regime": [REGIMES[c] for c in regime],
              "w0": res.W[:, 0, 0].numpy(), "w1": res.W[:, 0, 1].numpy(), "b0": res.b[:, 0].numpy(),
              "b1": res.b[:, 1].numpy()}
    cells = {"importance": cells_r, "density": cells_p, "trained_regime": [REGIMES[c] for c in trained],
             "analytic_regime": [REGIMES[c] for c in analytic],
             "seeds_in_analytic": (regime.reshape(-1, seeds) == analytic[:, None]).sum(1)}
    boundary = {"importance": rows, "analytic_density": p_star,
                "trained_density": np.array([trained_rows.get(float(x), np.nan) for x in rows])}
    return {"models": models, "cells": cells, "boundary": boundary}


def run_correlated(settings: Mapping[str, Mapping], seeds: int, train_spec: Mapping, seed: int,
                   threshold: float = REPRESENTED_NORM, device="cpu", progress: bool = False) -> dict:
    """Feature groups (correlated.py) in 2 dimensions: every setting x ``seeds`` models as one stack,
    equal importance. Tables: per model (loss), per feature
    (column, norm), per pair of represented features (cosine, type, relation), per correlated group (the
    share of its columns along their principal direction)."""
    sets = settings_from_config(settings)
    lay = correlated_layout(sets, seeds)
    M = lay.group_of.shape[0]
    importance = (lay.group_of >= 0).float()
    res = train(importance, None, 2, train_settings(train_spec), seed, device=device, progress=progress,
                desc="correlated features", sampler=lambda b, g: sample_grouped(lay, b, g))
    W = res.W.numpy()
    names = np.repeat([s.name for s in sets], seeds)
    seed_ids = np.tile(np.arange(seeds), len(sets))
    models = {"setting": list(names), "kind": list(np.repeat([s.kind for s in sets], seeds)),
              "sparsity": np.repeat([s.sparsity for s in sets], seeds), "seed": seed_ids,
              "train_loss": res.final_loss.double().numpy()}
    feats = {k: [] for k in ("setting", "seed", "feature", "group", "w", "norm")}
    pairs = {k: [] for k in ("setting", "seed", "i", "j", "pair_type", "cos", "relation")}
    groups = {k: [] for k in ("setting", "seed", "group", "principal_share", "represented")}
    for k in range(M):
        s = sets[k // seeds]
        w = W[k][:, : s.features]  # [hidden features], padding dropped
        norms = np.linalg.norm(w, axis=0)
        for f in range(s.features):
            for key, v in (("setting", s.name), ("seed", seed_ids[k]), ("feature", f), ("group", s.group_of()[f]),
                           ("w", w[:, f].astype(np.float32)), ("norm", norms[f])):
                feats[key].append(v)
        cos = pair_cosines(w)
        rep = np.flatnonzero(norms > threshold)
        for a_i, i in enumerate(rep):
            for j in rep[a_i + 1:]:
                for key, v in (("setting", s.name), ("seed", seed_ids[k]), ("i", i), ("j", j),
                               ("pair_type", pair_type(s, i, j)), ("cos", cos[i, j]),
                               ("relation", str(relation(cos[i, j])))):
                    pairs[key].append(v)
        if s.kind == "correlated":
            for g in range(s.groups):
                members = np.flatnonzero(s.group_of() == g)
                for key, v in (("setting", s.name), ("seed", seed_ids[k]), ("group", g),
                               ("principal_share", float(principal_share(w[:, members]))),
                               ("represented", int((norms[members] > threshold).sum()))):
                    groups[key].append(v)
    return {"models": models, "features": feats, "pairs": pairs, "groups": groups}
