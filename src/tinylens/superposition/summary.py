"""The superposition family's headline numbers (metrics/superposition.json) from its tables, the source's
findings beside ours (method.md §11; Elhage et al. 2022)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tinylens.measures import ratio_test, wilson_interval
from tinylens.superposition.correlated import ALIGNED_COS, ORTHOGONAL_COS
from tinylens.superposition.dynamics import running_median
from tinylens.superposition.geometry import REPRESENTED_NORM
from tinylens.superposition.levels import fraction_coverage, parse_fractions
from tinylens.superposition.phase_change import crossings
from tinylens.wording import get, num, percent, stated


def summarize_uniform(models: Mapping[str, np.ndarray]) -> dict:
    S = np.asarray(models["sparsity"])
    out = []
    for s in np.unique(S):
        sel = S == s
        polys = Counter(np.asarray(models["polygon"], dtype=object)[sel])
        loss = np.asarray(models["loss"])[sel]
        out.append({"sparsity": float(s),
                    "n_represented_mean": float(np.mean(np.asarray(models["n_represented"])[sel])),
                    "polygons": dict(polys.most_common()),
                    "pentagon_seeds": share(polys.get("pentagon", 0), int(sel.sum())),  # Wilson 95% interval
                    "lowest_loss_polygon": str(np.asarray(models["polygon"], dtype=object)[sel][np.argmin(loss)]),
                    "mean_loss": float(np.mean(loss))})
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
    real = np.asarray(jumps["exceeds_noise"], dtype=bool)  # every move between plateaus; these are the jumps
    transitions = Counter(f"{a} -> {b}" for a, b, r in zip(jumps["from_fraction"], jumps["to_fraction"], real) if r)
    small = Counter(f"{a} -> {b}" for a, b, r in zip(jumps["from_fraction"], jumps["to_fraction"], real) if not r)
    J_S = np.asarray(jumps["sparsity"])
    dyn = np.isclose(J_S, dynamics_sparsity) & real
    size = np.asarray(jumps["size_over_noise"], dtype=float)
    per_sparsity = []
    S = np.asarray(features["sparsity"])
    for k, s in enumerate(np.asarray(models["sparsity"])):
        sel = (S == s) & rep
        per_sparsity.append({"sparsity": float(s), "one_over_density": float(1 / (1 - s)),
                             "dims_per_feature": float(models["dims_per_feature"][k]),
                             "n_represented": int(models["n_represented"][k]),
                             "share_near_fraction": float(near[sel].mean()) if sel.any() else None,
                             "jumps": int((np.isclose(J_S, s) & real).sum()),
                             "moves_within_noise": int((np.isclose(J_S, s) & ~real).sum()),
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
            "total": int(real.sum()),
            "by_transition": dict(transitions.most_common()),
            "moves_within_noise": int((~real).sum()),
            "moves_within_noise_by_transition": dict(small.most_common()),
            "median_size_over_noise": {"jumps": float(np.median(size[real])) if real.any() else None,
                                       "moves_within_noise": float(np.median(size[~real])) if (~real).any()
                                       else None},
            "dynamics_sparsity": dynamics_sparsity,
            "at_dynamics_sparsity": [
                {"feature": int(f), "step": int(st), "from": a, "to": b, "size_over_noise": float(z)}
                for f, st, a, b, z, keep in zip(jumps["feature"], jumps["step"], jumps["from_fraction"],
                                                jumps["to_fraction"], size, dyn) if keep],
        },
    }


def movement_shares(training: Mapping, jumps: Mapping, smooth: int) -> dict:
    """How much of D_i's movement over training the jumps carry (source 004: learning "dominated by
    energy-level jumps"). Per feature of every sparsity (the unit), its total movement is the path length
    sum_t |D_i(t+1) - D_i(t)| of its D_i over the snapshots, smoothed by the running median of ``smooth``
    snapshots as the jump finder smooths it; a jump carries |to - from|, the distance between its plateaus'
    levels, and so does a move within noise. The share the jumps carry of the total, with its bootstrap
    interval over features (:func:`tinylens.measures.ratio_test` against one half): ``dominated`` when it
    lies above one half."""
    sparsity, feature = np.asarray(training["sparsity"]), np.asarray(training["feature"])
    step, d = np.asarray(training["step"]), np.asarray(training["dimensionality"], dtype=np.float64)
    units = sorted(set(zip(sparsity.tolist(), feature.tolist())))
    index = {u: i for i, u in enumerate(units)}
    total, net = np.zeros(len(units)), np.zeros(len(units))
    for u, i in index.items():
        sel = np.flatnonzero((sparsity == u[0]) & (feature == u[1]))
        curve = running_median(d[sel[np.argsort(step[sel], kind="stable")]], smooth)
        total[i] = float(np.abs(np.diff(curve)).sum())
        net[i] = float(abs(curve[-1] - curve[0]))  # the least movement any path from start to end covers
    carried = {True: np.zeros(len(units)), False: np.zeros(len(units))}
    for s_, f, a, b, real in zip(jumps["sparsity"], jumps["feature"], jumps["from_fraction"], jumps["to_fraction"],
                                 jumps["exceeds_noise"]):
        carried[bool(real)][index[(float(s_), int(f))]] += abs(float(Fraction(b)) - float(Fraction(a)))
    whole = float(total.sum())
    return {"definition": f"per feature, the path length of its D_i over the snapshots (running median of {smooth}); "
                          "a jump or a move within noise carries the distance between its two plateaus' levels",
            "features": len(units), "total_movement": whole, "net_displacement": float(net.sum()),
            "jumps_over_net_displacement": float(carried[True].sum() / net.sum()) if net.sum() > 0 else None,
            "jumps": float(carried[True].sum()), "moves_within_noise": float(carried[False].sum()),
            "share_moves_within_noise": float(carried[False].sum() / whole) if whole > 0 else None,
            "jumps_share": ratio_test(carried[True], total, null=0.5)}


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
    "correlated": "features in correlated groups (on together) prefer orthogonal directions, 'local orthogonal "
                  "bases', with different groups antipodal to each other; anti-correlated features (at most one of "
                  "a group on) prefer to be antipodal, sharing a dimension; with too little room, correlated "
                  "features collapse into their principal component (Elhage et al. 2022, correlated features).",
}


def summarize_family(uniform, nonuniform, dim_models, dim_features, jumps, phase_cells, phase_boundary,
                     correlated: Mapping[str, Mapping], fixed_sparsity: float, dynamics_sparsity: float, phase_seeds: int,
                     fractions: Sequence[Fraction], tolerance: float, jump_settings: Mapping,
                     threshold: float = REPRESENTED_NORM, dim_training: Mapping | None = None) -> dict:
    """Everything metrics/superposition.json holds: a flat headline, then each experiment with the source."""
    uni = summarize_uniform(uniform)
    non = summarize_nonuniform(nonuniform, fixed_sparsity)
    dim = summarize_dimensionality(dim_models, dim_features, jumps, fractions, tolerance, dynamics_sparsity,
                                   threshold)
    dim["jumps"]["definition"] = dict(jump_settings)
    if dim_training is not None:
        dim["jumps"]["movement"] = movement_shares(dim_training, jumps, jump_settings["smooth"])
    dim["jumps"]["rule"] = (
        f"a jump is a move between two plateaus of one feature's D_i (running median of {jump_settings['smooth']} "
        f"snapshots within {jump_settings['tolerance']} of a fraction for >= {jump_settings['min_dwell']} "
        f"snapshots, at most {jump_settings['max_transition']} snapshots apart) whose levels lie at least "
        f"{jump_settings['margin']} x the curve's plateau noise apart (robust SD of the raw D_i about its "
        f"plateaus' levels); smaller moves are counted as moves within noise")
    phase = summarize_phase_diagram(phase_cells, phase_boundary, phase_seeds)
    corr = summarize_correlated(correlated["models"], correlated["pairs"], correlated["groups"])
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
        "moves_within_noise": dim["jumps"]["moves_within_noise"],
        "jumps_share_of_movement": dim["jumps"].get("movement", {}).get("jumps_share"),
        "phase_agreement_best_seed": phase["agreement_best_seed"],
        "phase_boundary_mean_abs_log10_ratio": phase["boundary_mean_abs_log10_ratio"],
        "correlated_claims_hold": {name: e["claim"]["holds"] for name, e in corr["settings"].items() if "claim" in e},
        "correlated_collapse": ({r["setting"]: r["collapsed"] for r in corr["collapse"]["denser"]}
                                if corr["collapse"] else None),
    }
    return {
        "headline": headline,
        "uniform": {**uni, "source": SOURCE["uniform"]},
        "phase_change": {**non, "source": SOURCE["phase_change"]},
        "dimensionality": {**dim, "source": SOURCE["dimensionality"]},
        "phase_diagram": {**phase, "source": SOURCE["phase_diagram"]},
        "correlated": {**corr, "source": SOURCE["correlated"]},
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
        phase_boundary=tables["phase_boundary"],
        correlated={k: tables[f"correlated_{k}"] for k in ("models", "pairs", "groups")},
        fixed_sparsity=settings.fixed_sparsity,
        dynamics_sparsity=settings.dynamics_sparsity, phase_seeds=settings.phase_seeds,
        fractions=parse_fractions(settings.fractions), tolerance=settings.tolerance,
        jump_settings=settings.jumps, threshold=settings.represented_norm,
        dim_training=tables.get("dimensionality_training"))


# --- correlated and anti-correlated feature groups -------------------------------------------------------


def share(k: int, n: int) -> dict:
    return {"count": int(k), "of": int(n), "share": float(k / n) if n else None, "ci95": wilson_interval(k, n)}


def compare_shares(k1: int, n1: int, k2: int, n2: int) -> dict:
    """Two shares side by side with Fisher's exact test (two-sided) of equal proportions."""
    from scipy.stats import fisher_exact

    p = float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]])[1]) if n1 and n2 else None
    return {"a": share(k1, n1), "b": share(k2, n2), "fisher_p": p}


#: which relation each correlation type is claimed to prefer, and the comparison that tests it
CORRELATED_CLAIMS = {
    "correlated": ("same correlated group", "orthogonal",
                   "correlated features are placed orthogonally (local orthogonal bases)"),
    "anticorrelated": ("same anticorrelated group", "antipodal",
                       "anti-correlated features share a dimension as an antipodal pair"),
}


def summarize_correlated(models: Mapping, pairs: Mapping, groups: Mapping) -> dict:
    """Per setting: the pairs' relations by type; the claim of the setting's kind (anti-correlated settings;
    of the correlated ones the sparsest, which has the most room) tested against the pairs of different groups
    in the same models (Fisher's exact test, Wilson intervals); the correlated groups' principal share. Then
    the collapse: each denser correlated setting's share of aligned within-group pairs against the sparsest
    one's."""
    setting = np.asarray(pairs["setting"], dtype=object)
    ptype = np.asarray(pairs["pair_type"], dtype=object)
    rel = np.asarray(pairs["relation"], dtype=object)
    cos = np.asarray(pairs["cos"], dtype=float)
    m_setting = np.asarray(models["setting"], dtype=object)
    g_setting = np.asarray(groups["setting"], dtype=object)
    g_share = np.asarray(groups["principal_share"], dtype=float)
    out = {}
    corr = [n for n in dict.fromkeys(m_setting) if models["kind"][np.flatnonzero(m_setting == n)[0]] == "correlated"]
    sparse = max(corr, key=lambda n: float(models["sparsity"][np.flatnonzero(m_setting == n)[0]])) if corr else None
    for name in dict.fromkeys(m_setting):  # in config order
        row = np.flatnonzero(m_setting == name)[0]
        kind, sparsity = str(models["kind"][row]), float(models["sparsity"][row])
        here = setting == name
        by_type = {}
        for t in dict.fromkeys(ptype[here]):
            sel = here & (ptype == t)
            by_type[t] = {"pairs": int(sel.sum()), "mean_cos": float(cos[sel].mean()),
                          "relations": {r: share(int((rel[sel] == r).sum()), int(sel.sum()))
                                        for r in ("orthogonal", "antipodal", "aligned", "other")}}
        entry = {"kind": kind, "sparsity": sparsity, "models": int((m_setting == name).sum()), "pairs": by_type}
        # the claim of its kind: every anti-correlated setting; the sparsest correlated one (the room it needs)
        if kind == "anticorrelated" or name == sparse:
            within, relation, claim = CORRELATED_CLAIMS[kind]
            a, b = here & (ptype == within), here & (ptype == "different groups")
            test = compare_shares(int((rel[a] == relation).sum()), int(a.sum()),
                                  int((rel[b] == relation).sum()), int(b.sum()))
            ca, cb = test["a"]["ci95"], test["b"]["ci95"]
            entry["claim"] = {"source": claim, "relation": relation, "within_group": test["a"],
                              "different_groups": test["b"], "fisher_p": test["fisher_p"],
                              "holds": bool(ca is not None and cb is not None and ca[0] > cb[1]
                                            and test["a"]["share"] > 0.5)}
        gsel = g_setting == name
        if gsel.any():
            entry["principal_share"] = {"mean": float(np.nanmean(g_share[gsel])), "groups": int(gsel.sum())}
        out[name] = entry
    collapse = None
    if len(corr) >= 2:
        aligned = {n: out[n]["pairs"].get("same correlated group", {}).get("relations", {}).get("aligned")
                   for n in corr}
        rows = []
        for n in corr:
            if n == sparse or aligned[n] is None or aligned[sparse] is None:
                continue
            test = compare_shares(aligned[n]["count"], aligned[n]["of"], aligned[sparse]["count"],
                                  aligned[sparse]["of"])
            ca, cb = test["a"]["ci95"], test["b"]["ci95"]
            rows.append({"setting": n, "sparsity": out[n]["sparsity"], "aligned_within_group": test["a"],
                         "principal_share": out[n].get("principal_share", {}).get("mean"),
                         "fisher_p": test["fisher_p"],
                         "collapsed": bool(ca is not None and cb is not None and ca[0] > cb[1]
                                           and test["a"]["share"] > 0.5)})
        collapse = {"source": "with too little room (denser features), correlated features collapse into their "
                              "principal component: the group's columns align",
                    "reference": sparse, "reference_aligned_within_group": aligned[sparse],
                    "reference_principal_share": out[sparse].get("principal_share", {}).get("mean"),
                    "denser": rows}
    return {"settings": out, "collapse": collapse,
            "rule": f"a pair of represented features is orthogonal when |cos| < {ORTHOGONAL_COS}, antipodal when "
                    f"cos < -{ALIGNED_COS}, aligned when cos > {ALIGNED_COS}; a claim holds when the 95% Wilson interval of its relation's share "
                    "among within-group pairs lies above that among pairs of different groups in the same "
                    "models, and the share exceeds one half (Fisher's exact test p beside it)"}


def findings(documents: Mapping) -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings). ``documents``: ``superposition``
    (metrics/superposition.json)."""
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
    jumps, small = get(h, "jumps_total"), h.get("moves_within_noise")
    rule = ("" if small is None  # metrics from before the noise rule: their count is of every move
            else f" that clear the curve's own noise (and {small} smaller moves within it)")
    out.append(f"{percent(near)} of the feature dimensionalities in the fractions' range lie near a simple fraction "
               f"(a uniform spread would put {percent(chance)} there); D_i makes {jumps} "
               f"jump{'' if jumps == 1 else 's'} between fractions over training{rule}.")
    share = h.get("jumps_share_of_movement")
    if share is not None:  # metrics of earlier runs have no movement shares
        movement = get(documents["superposition"], "dimensionality", "jumps", "movement")
        out.append(f"Source 004's \"learning dominated by energy-level jumps\": the jumps carry "
                   f"{percent(get(share, 'ratio'))} of D_i's total movement over training (its path length, summed "
                   f"over {get(movement, 'features')} features; the moves within noise "
                   f"{percent(get(movement, 'share_moves_within_noise'))}, the rest is drift and jitter; against the net "
                   f"displacement, the least any path covers, the jumps carry "
                   f"{percent(get(movement, 'jumps_over_net_displacement'))}); against one half, by the bootstrap over "
                   "features, learning is "
                   + stated(share, "dominated", "not dominated", "cannot be told", what="share") + " by the jumps.")
    out.append(f"The trained n = 2, m = 1 models' regime matches the analytic one in "
               f"{percent(get(h, 'phase_agreement_best_seed'))} of the phase diagram's cells (best seed per cell).")
    claims, collapse = h.get("correlated_claims_hold"), h.get("correlated_collapse")
    if claims:
        said = {"correlated": "correlated features orthogonal within their group",
                "anticorrelated": "anti-correlated features antipodal"}
        parts = [f"{said.get(documents['superposition']['correlated']['settings'][n]['kind'], n)} "
                 f"({'holds' if ok else 'does not hold'})" for n, ok in claims.items()]
        if collapse:
            parts += [f"denser correlated features collapsed onto their principal component "
                      f"({'holds' if ok else 'does not hold'}, {n})" for n, ok in collapse.items()]
        out.append("Feature groups in two dimensions, each claim against the pairs of different groups "
                   "(Wilson intervals apart): " + "; ".join(parts) + ".")
    return out
