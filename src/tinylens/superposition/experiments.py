"""The four experiments of the superposition family, each one batched stack of toy models, and their tables.

Every ``run_*`` function takes plain values (the rule passes them from the
preset), trains one stack (every setting and seed at once), and returns
the columns of its Parquet tables, whose schemas are declared here. The
``summarize_*`` functions turn those tables into the numbers of
``metrics/superposition.json``. method.md §11; Elhage et al. (2022).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from tinylens.superposition.dynamics import find_jumps
from tinylens.superposition.geometry import (
    REPRESENTED_NORM,
    column_angles,
    dimensions_per_feature,
    feature_dimensionality,
    feature_norms,
    polygon_name,
)
from tinylens.superposition.levels import fraction_coverage, nearest_fraction, parse_fractions
from tinylens.superposition.model import TrainSettings, expected_loss, init_weights, train
from tinylens.superposition.phase_change import STARTS, crossings, start_weights
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
    max_transition of :func:`tinylens.superposition.dynamics.find_jumps`)."""
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
                            jumps["smooth"], jumps["max_transition"]):
            for key, value in (("sparsity", s), ("feature", j.feature), ("step", j.step),
                               ("from_fraction", str(j.from_fraction)), ("to_fraction", str(j.to_fraction)),
                               ("left_step", j.left_step), ("arrive_step", j.arrive_step)):
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


# ----------------------------------------------------------------------------------------------
# Headline numbers


def summarize_uniform(models: Mapping[str, np.ndarray]) -> dict:
    S = np.asarray(models["sparsity"])
    out = []
    for s in np.unique(S):
        sel = S == s
        polys = Counter(np.asarray(models["polygon"], dtype=object)[sel])
        out.append({"sparsity": float(s),
                    "n_represented_mean": float(np.mean(np.asarray(models["n_represented"])[sel])),
                    "polygons": dict(polys.most_common()),
                    "mean_loss": float(np.mean(np.asarray(models["loss"])[sel]))})
    return {"by_sparsity": out}


def summarize_nonuniform(models: Mapping[str, np.ndarray], fixed_sparsity: float) -> dict:
    start = np.asarray(models["start"], dtype=object)
    rel = np.asarray(models["relative_density"])
    loss = np.asarray(models["loss"])
    kept = np.asarray(models["kept_start_geometry"])
    pent, dig = start == "pentagon", start == "two digons"
    x = rel[pent]
    if not np.array_equal(x, rel[dig]):
        raise ValueError("the pentagon and two-digon starts must cover the same odd densities")
    diff = np.where(kept[pent] & kept[dig], loss[pent] - loss[dig], np.nan)
    found = crossings(x, diff)
    p_fixed = 1 - fixed_sparsity
    rand = start == "random"
    by_density = []
    for r in np.unique(rel):
        sel = rand & (rel == r)
        by_density.append({"relative_density": float(r), "odd_density": float(r * p_fixed),
                           "pentagon_loss": float(loss[pent & (rel == r)][0]),
                           "two_digons_loss": float(loss[dig & (rel == r)][0]),
                           "both_kept_their_geometry": bool(kept[pent & (rel == r)][0] and kept[dig & (rel == r)][0]),
                           "random_starts": dict(Counter(np.asarray(models["polygon"], dtype=object)[sel]))})
    return {
        "fixed_sparsity": fixed_sparsity,
        "crossing_relative_density": found[0] if len(found) == 1 else (found or None),
        "crossing_odd_density": found[0] * p_fixed if len(found) == 1 else ([f * p_fixed for f in found] or None),
        "crossing_odd_sparsity": 1 - found[0] * p_fixed if len(found) == 1 else None,
        "n_crossings": len(found),
        "by_odd_density": by_density,
    }


def summarize_dimensionality(models: Mapping, features: Mapping, jumps: Mapping, fractions: Sequence[Fraction],
                             tolerance: float, dynamics_sparsity: float, threshold: float = REPRESENTED_NORM) -> dict:
    norm = np.asarray(features["norm"])
    D = np.asarray(features["dimensionality"])
    rep = norm > threshold
    lowest = float(min(fractions))
    in_range = rep & (D >= lowest - tolerance)
    near = np.asarray(features["distance"]) <= tolerance
    transitions = Counter(f"{a} -> {b}" for a, b in zip(jumps["from_fraction"], jumps["to_fraction"]))
    J_S = np.asarray(jumps["sparsity"])
    dyn = np.isclose(J_S, dynamics_sparsity)
    per_sparsity = []
    S = np.asarray(features["sparsity"])
    for k, s in enumerate(np.asarray(models["sparsity"])):
        sel = (S == s) & rep
        per_sparsity.append({"sparsity": float(s), "one_over_density": float(1 / (1 - s)),
                             "dims_per_feature": float(models["dims_per_feature"][k]),
                             "n_represented": int(models["n_represented"][k]),
                             "share_near_fraction": float(near[sel].mean()) if sel.any() else None,
                             "jumps": int(np.isclose(J_S, s).sum()),
                             "fractions": dict(Counter(
                                 np.asarray(features["nearest_fraction"], dtype=object)[sel & near]))})
    return {
        "fractions": [str(f) for f in fractions],
        "tolerance": tolerance,
        "represented_features": int(rep.sum()),
        "share_near_fraction": float(near[rep].mean()) if rep.any() else None,
        "features_in_fraction_range": int(in_range.sum()),
        "share_near_fraction_in_range": float(near[in_range].mean()) if in_range.any() else None,
        "chance_share_in_range": fraction_coverage(fractions, tolerance, lowest - tolerance, 1.0),
        "by_sparsity": per_sparsity,
        "jumps": {
            "total": int(len(J_S)),
            "by_transition": dict(transitions.most_common()),
            "dynamics_sparsity": dynamics_sparsity,
            "at_dynamics_sparsity": [
                {"feature": int(f), "step": int(st), "from": a, "to": b}
                for f, st, a, b, keep in zip(jumps["feature"], jumps["step"], jumps["from_fraction"],
                                             jumps["to_fraction"], dyn) if keep],
        },
    }


def summarize_phase_diagram(cells: Mapping, boundary: Mapping, seeds: int) -> dict:
    trained = np.asarray(cells["trained_regime"], dtype=object)
    analytic = np.asarray(cells["analytic_regime"], dtype=object)
    b_an, b_tr = np.asarray(boundary["analytic_density"]), np.asarray(boundary["trained_density"])
    rows = np.isin(np.asarray(boundary["importance"]), np.unique(cells["importance"]))  # the trained rows
    both = np.isfinite(b_an) & np.isfinite(b_tr)
    return {
        "cells": int(len(trained)),
        "agreement_best_seed": float(np.mean(trained == analytic)),
        "agreement_all_seeds": float(np.sum(cells["seeds_in_analytic"]) / (len(trained) * seeds)),
        "trained_regime_counts": dict(Counter(trained).most_common()),
        "analytic_regime_counts": dict(Counter(analytic).most_common()),
        "boundary_rows": [{"importance": float(r), "analytic_density": None if not np.isfinite(a) else float(a),
                           "trained_density": None if not np.isfinite(t) else float(t)}
                          for r, a, t, keep in zip(boundary["importance"], b_an, b_tr, rows) if keep],
        "boundary_mean_abs_log10_ratio": (float(np.mean(np.abs(np.log10(b_tr[both] / b_an[both]))))
                                          if both.any() else None),
    }


def preset_problems(spec: Mapping, where: str) -> list[str]:
    """What JSON Schema cannot say about a preset's ``superposition`` section, one line per problem."""
    problems = []
    dim = spec["dimensionality"]
    if dim["hidden"] >= dim["features"]:
        problems.append(f"config key '{where}.dimensionality.hidden' ({dim['hidden']}) must be smaller than "
                        f"'features' ({dim['features']}): superposition needs more features than dimensions")
    if not any(abs(s - spec["dynamics_sparsity"]) < 1e-9 for s in dim["sparsities"]):
        problems.append(f"config key '{where}.dynamics_sparsity' ({spec['dynamics_sparsity']}) must be one of "
                        f"'dimensionality.sparsities' {dim['sparsities']}")
    if dim["snapshots"] > dim["steps"]:
        problems.append(f"config key '{where}.dimensionality.snapshots' ({dim['snapshots']}) exceeds its "
                        f"'steps' ({dim['steps']})")
    for key, grid in (("nonuniform.relative_density", spec["nonuniform"]["relative_density"]),
                      ("phase_diagram.importance", spec["phase_diagram"]["importance"]),
                      ("phase_diagram.density", spec["phase_diagram"]["density"])):
        if not grid["min"] < grid["max"]:
            problems.append(f"config key '{where}.{key}': min ({grid['min']}) must be below max ({grid['max']})")
    if spec["phase_diagram"]["density"]["max"] > 1:
        problems.append(f"config key '{where}.phase_diagram.density.max' must be at most 1 (a probability)")
    return problems


#: What the source reported (method.md §11; Elhage et al. 2022, "Toy Models of Superposition"), put
#: beside our numbers in metrics/superposition.json. The source gives geometry, not tables of numbers.
SOURCE = {
    "uniform": "n = 5, m = 2: dense features get an orthogonal pair of dimensions (the rest dropped); as "
               "sparsity grows more features are packed in, ending in a regular pentagon (all five "
               "represented, 72 degrees apart, D_i = 2/5).",
    "phase_change": "one feature made sparser than the other four: the pentagon deforms, then switches "
                    "abruptly to two digons with that feature at zero; the loss curves of the two geometries "
                    "cross at the switch (a first-order phase change). No crossing value is published.",
    "dimensionality": "D_i clusters at simple fractions (1, 3/4, 2/3, 1/2, 2/5, 3/8, 1/3 ...: tetrahedron, "
                      "triangle, digon, pentagon, square antiprism); D* sticks at 1/2 over a range of "
                      "sparsity; over training D_i moves between the fractions in jumps ('energy levels').",
    "phase_diagram": "n = 2, m = 1: dense features: the more important one takes the dimension (the extra "
                     "feature is not represented for r < 1, gets the dimension for r > 1); sparse enough "
                     "features: superposition (antipodal pair); the trained models' regimes follow the "
                     "analytic boundaries.",
}


def summarize_family(uniform, nonuniform, dim_models, dim_features, jumps, phase_cells, phase_boundary,
                     fixed_sparsity: float, dynamics_sparsity: float, phase_seeds: int,
                     fractions: Sequence[Fraction], tolerance: float, jump_settings: Mapping,
                     threshold: float = REPRESENTED_NORM) -> dict:
    """Everything metrics/superposition.json holds: a flat headline, then each experiment with the source."""
    uni = summarize_uniform(uniform)
    non = summarize_nonuniform(nonuniform, fixed_sparsity)
    dim = summarize_dimensionality(dim_models, dim_features, jumps, fractions, tolerance, dynamics_sparsity,
                                   threshold)
    dim["jumps"]["definition"] = dict(jump_settings)
    phase = summarize_phase_diagram(phase_cells, phase_boundary, phase_seeds)
    top = uni["by_sparsity"][-1]
    headline = {
        "uniform_sparsest_mean_represented": top["n_represented_mean"],
        "uniform_sparsest_pentagon_share": top["polygons"].get("pentagon", 0) / max(sum(top["polygons"].values()), 1),
        "crossing_relative_density": non["crossing_relative_density"],
        "crossing_odd_sparsity": non["crossing_odd_sparsity"],
        "share_near_fraction": dim["share_near_fraction"],
        "share_near_fraction_in_range": dim["share_near_fraction_in_range"],
        "chance_share_in_range": dim["chance_share_in_range"],
        "jumps_total": dim["jumps"]["total"],
        "phase_agreement_best_seed": phase["agreement_best_seed"],
        "phase_boundary_mean_abs_log10_ratio": phase["boundary_mean_abs_log10_ratio"],
    }
    return {
        "headline": headline,
        "uniform": {**uni, "source": SOURCE["uniform"]},
        "phase_change": {**non, "source": SOURCE["phase_change"]},
        "dimensionality": {**dim, "source": SOURCE["dimensionality"]},
        "phase_diagram": {**phase, "source": SOURCE["phase_diagram"]},
    }


@dataclass(frozen=True)
class SummarySettings:
    """What the family's summary reads besides its tables: from the preset's sweeps, the non-uniform
    sweep's ``fixed_sparsity``, the dimensionality entry drawn over training (``dynamics_sparsity``) and the
    phase diagram's ``seeds`` per cell; and the top-level ``superposition`` definitions (``fractions`` as
    written in the config, ``tolerance``, the ``jumps`` settings, ``represented_norm``)."""

    fixed_sparsity: float
    dynamics_sparsity: float
    phase_seeds: int
    fractions: Sequence[str]
    tolerance: float
    jumps: Mapping
    represented_norm: float


def summary_settings(spec: Mapping, definitions: Mapping) -> dict:
    """The :class:`SummarySettings` (as the rule's params) from a preset's ``superposition`` section and the
    top-level ``superposition`` definitions."""
    return {"fixed_sparsity": spec["nonuniform"]["fixed_sparsity"], "dynamics_sparsity": spec["dynamics_sparsity"],
            "phase_seeds": spec["phase_diagram"]["seeds"], "fractions": definitions["fractions"],
            "tolerance": definitions["tolerance"], "jumps": definitions["jumps"],
            "represented_norm": definitions["represented_norm"]}


def summarize_tables(tables: Mapping[str, Mapping], settings: SummarySettings) -> dict:
    """:func:`summarize_family` from the family's tables (keyed by their names in ``schemas.TABLES``)."""
    return summarize_family(
        uniform=tables["uniform_models"], nonuniform=tables["nonuniform_models"],
        dim_models=tables["dimensionality_models"], dim_features=tables["dimensionality_features"],
        jumps=tables["dimensionality_jumps"], phase_cells=tables["phase_cells"],
        phase_boundary=tables["phase_boundary"], fixed_sparsity=settings.fixed_sparsity,
        dynamics_sparsity=settings.dynamics_sparsity, phase_seeds=settings.phase_seeds,
        fractions=parse_fractions(settings.fractions), tolerance=settings.tolerance,
        jump_settings=settings.jumps, threshold=settings.represented_norm)
