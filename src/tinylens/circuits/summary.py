"""The family's headline numbers (``metrics/circuits.json``), with the source's beside ours."""

from __future__ import annotations

import math

import polars as pl

from tinylens.circuits.schemas import KINDS
from tinylens.circuits.training import VARIANTS, across_seeds, formation, top_pairs, variant_name
from tinylens.wording import block, get, num, span, trained

#: A transformation "leaves the real model unchanged" when no logit moves by more than this
#: (float64 throughout, so rounding gives ~1e-13; LayerNorm's eps makes a scaling move the logits
#: by more, which the eps = 0 check separates).
SURVIVAL_TOLERANCE = 1e-4

CURVE_FREE = ("pair", "final_score", "final_z", "formed_at", "half_rise_at")

SOURCE = {
    "document": "003, 'Why Is Measuring Composition So Difficult?' (method.md §9)",
    "score": "||L R||_F / (||L||_F ||R||_F), L = W_OV^A; R = W_QK^B (Q), W_QK^B^T (K), W_OV^B (V)",
    "gaussian_baseline_paper_d_model": {"d_model": 384, "value": round(1 / math.sqrt(384), 4),
                                        "note": "about 1/sqrt(d_model) for random Gaussian matrices"},
    "claims": [
        "ignoring LayerNorm, W_E -> W_E T, writers -> W T, readers -> T^-1 W gives the same model",
        "residual-basis scores are invariant under orthogonal T and change under a general T",
        "token-basis scores are invariant under every T",
        "with LayerNorm kept only orthogonal T that fix the all-ones direction, and scalings "
        "absorbed by the gain, leave the model unchanged",
    ],
}


def symmetry_digest(summary: dict[str, dict]) -> dict[str, dict]:
    """Per T: the numbers of the Kendall-tau table (residual basis), the largest token-basis score
    change, the logit changes, and whether the real model survives with LayerNorm kept."""
    out = {}
    for name in summary:
        e = summary[name]
        res, tok = e["scores"]["residual"], e["scores"]["token"]
        out[name] = {
            "condition_number": e["condition_number"],
            "orthogonal": e["orthogonal"],
            "fixes_ones": e["fixes_ones"],
            "kendall_tau": {k: res[k]["kendall_tau"] for k in KINDS},
            "max_rank_change": {k: res[k]["max_rank_change"] for k in KINDS},
            "residual_max_abs_score_change": max(res[k]["max_abs_change"] for k in KINDS),
            "token_max_abs_score_change": max(tok[k]["max_abs_change"] for k in KINDS),
            "layernorm_free_max_logit_change": e["layernorm_free_max_logit_change"],
            "real_fold_max_logit_change": e["real_fold_max_logit_change"],
            "real_untouched_max_logit_change": e["real_untouched_max_logit_change"],
            "real_fold_eps0_max_logit_change": e["real_fold_eps0_max_logit_change"],
            "real_max_abs_logit": e["real_max_abs_logit"],
            "real_model_survives": e["real_fold_max_logit_change"] <= SURVIVAL_TOLERANCE,
            "real_model_survives_without_eps": e["real_fold_eps0_max_logit_change"] <= SURVIVAL_TOLERANCE,
        }
    return out


#: What ``symmetry_result`` says of a model the symmetry test does not run on (an external model: the test
#: transforms and reruns our own architecture's modules).
SYMMETRY_NOT_RUN = "the symmetry test runs on our own models only (it transforms and reruns their modules)"


def rmsnorm_section(result: dict) -> dict:
    """The RMSNorm variant's symmetry test (rule rmsnorm_symmetry) read as source 003's claims: which T leave the
    real model unchanged (every rotation and, up to eps, a scaling are expected; a general T is not), and the
    near-symmetries: the maps whose mean KL stays within ``max_kl`` and, of them, the one whose residual-basis
    ranking moves most (the claim holds when its Kendall tau falls to ``max_tau`` or below)."""
    digest = result["transforms"]
    survivors = [t for t, e in digest.items() if e["real_model_survives"]]
    up_to_eps = [t for t, e in digest.items() if e["real_model_survives_without_eps"] and t not in survivors]
    changed = [t for t in digest if t not in survivors + up_to_eps]
    rotations = [t for t, e in digest.items() if e["orthogonal"]]
    near = result["near_symmetries"]
    small = [m for m in near["maps"] if m["kl_mean"] <= near["max_kl"]]
    best = min(small, key=lambda m: m["kendall_tau_min"]) if small else None
    return {
        "norm": result["norm"], "training": result["training"],
        "real_model_survives": survivors, "real_model_survives_up_to_eps": up_to_eps,
        "real_model_changes": changed,
        # every rotation survives, and a scaling (up to eps at most); nothing else does
        "only_rotations_and_scalings_survive": set(rotations) <= set(survivors)
        and set(survivors + up_to_eps) <= set(rotations) | {"scaling"} and "scaling" in survivors + up_to_eps,
        "largest_survivor_logit_change": max((digest[t]["real_fold_max_logit_change"] for t in survivors), default=None),
        "smallest_change_of_the_rest": min((digest[t]["real_fold_max_logit_change"] for t in changed), default=None),
        "near_symmetries": {"maps": near["maps"], "max_kl": near["max_kl"], "max_tau": near["max_tau"],
                            "within_max_kl": best,
                            "holds": bool(best is not None and best["kendall_tau_min"] <= near["max_tau"])},
        "transforms": digest,
    }


def summarize(final: pl.DataFrame, over_training: dict[int, pl.DataFrame], symmetry: dict[str, dict] | None,
              original: int, n_layer: int, n_head: int, d_model: int, n: int, rmsnorm: dict | None = None) -> dict:
    """metrics/circuits.json: top pairs of the original model with baselines, baselines, agreement
    across seeds, the symmetry test, and when the strongest K-composition pairs form.

    ``symmetry`` None (an external model): the same keys, ``symmetry`` empty and ``symmetry_result`` saying
    the test was not run (:data:`SYMMETRY_NOT_RUN`). ``rmsnorm``: the RMSNorm variant's symmetry test (rule
    rmsnorm_symmetry), where the preset trains it."""
    orig = final.filter(pl.col("seed") == original)
    baselines = {}
    for basis, layernorm in VARIANTS:
        sel = orig.filter((pl.col("basis") == basis) & (pl.col("layernorm") == layernorm))
        baselines[variant_name(basis, layernorm)] = {
            k: {"mean": float(s["baseline_mean"].mean()), "std": float(s["baseline_std"].mean()),
                "mean_score_all_pairs": float(s["score"].mean())}
            for k in KINDS if (s := sel.filter(pl.col("kind") == k)).height}
    digest = symmetry_digest(symmetry or {})
    survivors = [t for t, e in digest.items() if e["real_model_survives"]]
    up_to_eps = [t for t, e in digest.items() if e["real_model_survives_without_eps"] and t not in survivors]
    return {
        "source": SOURCE,
        "original_seed": original,
        "shape": {"d_model": d_model, "n_layer": n_layer, "n_head": n_head,
                  "pairs": n_head * n_head * n_layer * (n_layer - 1) // 2,
                  "gaussian_1_over_sqrt_d_model": 1 / math.sqrt(d_model)},
        "top_pairs": top_pairs(orig, n),
        "baselines": baselines,
        "across_seeds": across_seeds(final, original, n_layer, n),
        "symmetry": digest,
        "symmetry_result": {"not_run": SYMMETRY_NOT_RUN} if symmetry is None else {
            "real_model_survives_with_layernorm": survivors,
            "real_model_survives_up_to_layernorm_eps": up_to_eps,
            "real_model_changes_with_layernorm": [t for t in digest if t not in survivors + up_to_eps],
            "tolerance_max_logit_change": SURVIVAL_TOLERANCE,
            "layernorm_handling": "gains folded into the readers, bias moved as b T, gain set to |det T|^(1/d)",
        },
        "over_training": {str(seed): {v: [{k: p[k] for k in CURVE_FREE} for p in pairs]
                                      for v, pairs in formation(df, n).items()}
                          for seed, df in over_training.items()},
        **({"rmsnorm_variant": rmsnorm_section(rmsnorm)} if rmsnorm is not None else {}),
    }


def findings(documents: dict) -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings): which transformations leave the real
    model unchanged, how the residual-basis ranking moves under the rest (uniform scaling apart: it keeps every
    order trivially), and source 003's claims on the RMSNorm variant. ``documents``: ``circuits``
    (metrics/circuits.json)."""
    doc = documents["circuits"]
    result = get(doc, "symmetry_result")
    if "not_run" in result:  # an external model: the top pairs, and why the symmetry test is not run
        top = get(doc, "top_pairs", "token/folded", "K", 0)
        strongest = (f"The K-composition furthest above its random-head baseline in the token basis (LayerNorm "
                     f"folded) is block {block(top['layer_a'])}, head {block(top['head_a'])} -> block "
                     f"{block(top['layer_b'])}, head {block(top['head_b'])}: {num(top['score'])} against "
                     f"{num(top['baseline_mean'])} +- "
                     f"{num(top['baseline_std'], 2)} (z = {num(top['z'], 2)}).")
        return [strongest, f"The symmetry test is not run: {result['not_run']}."]
    survive = get(result, "real_model_survives_with_layernorm")
    changes = get(result, "real_model_changes_with_layernorm")
    eps = get(result, "real_model_survives_up_to_layernorm_eps")
    out = [f"Of {len(get(doc, 'symmetry'))} invertible transformations of the residual basis, the real model (LayerNorm "
           f"kept) is unchanged by {', '.join(survive) or 'none'}"
           + (f", unchanged up to LayerNorm's eps by {', '.join(eps)}" if eps else "")
           + (f" and changed by {', '.join(changes)}" if changes else "") + "."]
    symmetry = get(doc, "symmetry")
    general = {t: e for t, e in symmetry.items() if not get(e, "orthogonal") and t != "scaling"}
    if general:
        taus = [tau for e in general.values() for tau in get(e, "kendall_tau").values()]
        token = [get(e, "token_max_abs_score_change") for e in general.values()]
        scaling = ("Uniform scaling keeps the residual-basis ranking (Kendall tau "
                   f"{span(list(get(symmetry, 'scaling', 'kendall_tau').values()), 2)}), trivially: every score is a "
                   "ratio of norms, blind to a common factor. " if "scaling" in symmetry else "")
        out.append(f"{scaling}Under the non-trivial non-orthogonal maps ({', '.join(general)}), the residual-basis "
                   f"composition ranking keeps a Kendall tau of {span(taus, 2)} while token-basis scores move by at "
                   f"most {num(max(token), 2)}.")
    variant = doc.get("rmsnorm_variant") if isinstance(doc, dict) else None
    if variant is not None:
        out += _rmsnorm_sentences(variant)
    return out


def _rmsnorm_sentences(v: dict) -> list[str]:
    """Source 003's two claims on the RMSNorm variant, each with the numbers that decide it."""
    holds = get(v, "only_rotations_and_scalings_survive")
    eps = get(v, "real_model_survives_up_to_eps")
    out = [f"Source 003's \"with RMSNorm only rotations and a scalar remain\" {'holds' if holds else 'does not hold'} "
           f"in the RMSNorm variant ({trained(get(v, 'training'))}): the real model is unchanged by "
           f"{', '.join(get(v, 'real_model_survives')) or 'none'} (largest logit change "
           f"{num(get(v, 'largest_survivor_logit_change'), 2)})"
           + (f", by {', '.join(eps)} up to the norm's eps" if eps else "")
           + f", and changed by {', '.join(get(v, 'real_model_changes')) or 'none'} (logits move by at least "
           f"{num(get(v, 'smallest_change_of_the_rest'), 2)})."]
    near = get(v, "near_symmetries")
    best = get(near, "within_max_kl")
    maps = get(near, "maps")
    tried = ", ".join(f"{num(get(m, 'epsilon'))}: KL {num(get(m, 'kl_mean'), 2)}, tau {num(get(m, 'kendall_tau_min'), 2)}"
                      for m in maps)
    claim = ("Source 003's near-symmetries (maps that move the output little while they reorder the composition "
             f"ranking), tried as T = exp(epsilon S) on the same model (epsilon: mean KL per token in nats, the "
             f"lowest Kendall tau of the Q-, K- and V-composition rankings; {tried}): ")
    if best is None:
        out.append(claim + f"no map stays within {num(get(near, 'max_kl'))} nats, so the claim cannot be told.")
    else:
        out.append(claim + f"within {num(get(near, 'max_kl'))} nats the ranking falls to a Kendall tau of "
                   f"{num(get(best, 'kendall_tau_min'), 2)} (epsilon {num(get(best, 'epsilon'))}, KL "
                   f"{num(get(best, 'kl_mean'), 2)}): the claim {'holds' if get(near, 'holds') else 'does not hold'} "
                   f"(it holds where a map within that KL brings tau to {num(get(near, 'max_tau'))} or below).")
    return out
