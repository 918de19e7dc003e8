"""The superposition family's headline numbers (metrics/superposition.json) from its tables, the source's
findings beside ours (method.md §11; Elhage et al. 2022)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tinylens.superposition.geometry import REPRESENTED_NORM
from tinylens.superposition.levels import fraction_coverage, parse_fractions
from tinylens.superposition.phase_change import crossings


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


def findings(documents: Mapping) -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings). ``documents``: ``superposition``
    (metrics/superposition.json)."""
    from tinylens.findings import get, num, percent

    h = get(documents["superposition"], "headline")
    out = [f"Five sparse features in two dimensions: at the sparsest setting {num(get(h, 'uniform_sparsest_mean_represented'))} "
           f"of 5 are represented on average, as a pentagon in {percent(get(h, 'uniform_sparsest_pentagon_share'))} "
           "of the seeds."]
    crossing = get(h, "crossing_odd_sparsity")
    out.append(f"With one feature sparser than the others, the pentagon's and the two digons' losses cross at the odd "
               f"feature's sparsity {num(crossing, 4)} ({num(get(h, 'crossing_relative_density'), 2)} times the "
               "others' density)." if crossing is not None else
               "With one feature sparser than the others, the pentagon's and the two digons' losses do not cross "
               "exactly once on the grid.")
    near, chance = get(h, "share_near_fraction_in_range"), get(h, "chance_share_in_range")
    jumps = get(h, "jumps_total")
    out.append(f"{percent(near)} of the feature dimensionalities in the fractions' range lie near a simple fraction "
               f"(a uniform spread would put {percent(chance)} there); D_i makes {jumps} "
               f"jump{'' if jumps == 1 else 's'} between fractions over training.")
    out.append(f"The trained n = 2, m = 1 models' regime matches the analytic one in "
               f"{percent(get(h, 'phase_agreement_best_seed'))} of the phase diagram's cells (best seed per cell).")
    return out
