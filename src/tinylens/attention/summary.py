"""The family's headline numbers: what metrics/attention.json holds, with the source's claims beside them.

Source 001 states its readings as hypotheses and measures none of them, so the "source" entries
are its claims in words (and the tuned-lens paper's finding), not numbers to match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tinylens.attention.schemas import EIGEN_AGREEMENT, WEIGHTINGS
from tinylens.measures import standard_error
from tinylens.wording import block, get, num, percent, stated, trained

#: What the sources say each measurement should show.
SOURCE_CLAIMS = {
    "spectra": "001: attention matrices are row-stochastic and, being causal, lower triangular, so their "
               "eigenvalues are the diagonal; the backward walk S^k is absorbed at the first position.",
    "odds_ratio": "001: log S_ij - log S_ik = q_i . (k_j - k_k) / sqrt(d_head): attention compares keys "
                  "through their distance to the query, with the key norm acting as a bias.",
    "trajectories": "001: a token's states across depth form a trajectory ending near the next token's "
                    "embedding. Tuned lens (Belrose et al. 2023): the tuned lens has lower KL to the final "
                    "distribution than the logit lens at every depth.",
    "probes": "001: context-pooled features that a linear classifier separates are evidence of attractors.",
    "tied": "001: the final state points at the next token's embedding, a premise that holds only where the "
            "unembedding is the embedding (tied): the paper's models and ours are untied.",
    "convex_hull": "001: attention moves each token's state towards a weighted mean of value vectors, so the next "
                   "token's state is about V^T A_t, inside the convex hull of the values, with "
                   "(S - A)^T V V^T (S - A) as its potential.",
}

HEAD_FIELDS = ("block", "head", "diag_mean", "diag_median", "slowest_transient_eigenvalue", "half_absorption_mean")


def finite_or_none(x: float) -> float | None:
    """JSON has no infinity: a walk never half-absorbed is ``null``."""
    return None if x is None or not math.isfinite(x) else float(x)


def _head_row(columns: Mapping[str, np.ndarray], i: int) -> dict:
    row = {k: columns[k][i].item() for k in HEAD_FIELDS}
    row["half_absorption_mean"] = finite_or_none(row["half_absorption_mean"])
    return row


def summarize_heads(columns: Mapping[str, np.ndarray], top: int = 3) -> dict:
    """Headline of the head table: the checks, the heads with the most and least self-attention,
    absorption speed, and the odds-ratio shares (mean over heads, and the extreme heads).

    Blocks and heads are 0-based here as in the tables."""
    order = np.argsort(-columns["diag_mean"], kind="stable")
    half = np.asarray(columns["half_absorption_mean"], dtype=np.float64)
    shares = ("share_distance", "share_key_norm", "share_cross", "share_key_effect", "share_interaction")
    by_key = np.argsort(-columns["share_key_effect"], kind="stable")
    return {
        "checks": {
            "row_sum_max_error": float(np.max(columns["row_sum_max_error"])),
            "above_diagonal_max": float(np.max(columns["above_diagonal_max"])),
            "eigen_gap_median": float(np.nanmedian(columns["eigen_gap_median"])),
            "eigen_gap_max": float(np.nanmax(columns["eigen_gap_max"])),
            "eigen_agree_share": float(np.nanmean(columns["eigen_agree_share"])),
            "eigen_agree_threshold": EIGEN_AGREEMENT,
            "pattern_vs_scores_max_error": float(np.max(columns["pattern_vs_scores_max_error"])),
        },
        "most_self_attention": [_head_row(columns, i) for i in order[:top]],
        "least_self_attention": [_head_row(columns, i) for i in order[::-1][:top]],
        "absorption": {
            "half_absorption_median": finite_or_none(float(np.median(half))),
            "never_half_absorbed": int((~np.isfinite(half)).sum()),
            "fastest": _head_row(columns, int(np.argmin(half))),
            "slowest": _head_row(columns, int(np.argmax(half))),
        },
        "odds_ratio": {
            "mean_over_heads": {k: float(np.mean(columns[k])) for k in shares},
            "most_key_driven": {"block": int(columns["block"][by_key[0]]), "head": int(columns["head"][by_key[0]]),
                                "share_key_effect": float(columns["share_key_effect"][by_key[0]])},
            "most_query_driven": {"block": int(columns["block"][by_key[-1]]), "head": int(columns["head"][by_key[-1]]),
                                  "share_key_effect": float(columns["share_key_effect"][by_key[-1]])},
        },
    }


def summarize_probes(columns: Mapping[str, Sequence]) -> dict:
    """Per depth: accuracy and balanced accuracy of each classifier and chance; the best depth of the
    logistic probe by balanced accuracy."""
    depth = np.asarray(columns["depth"])
    classifier = np.asarray(columns["classifier"])
    per_depth = []
    for d in np.unique(depth):
        row: dict = {"depth": int(d)}
        for name in np.unique(classifier):
            i = int(np.nonzero((depth == d) & (classifier == name))[0][0])
            row[str(name)] = {k: float(columns[k][i]) for k in
                              ("accuracy", "balanced_accuracy", "accuracy_std", "balanced_accuracy_std")}
        per_depth.append(row)
    best = max(per_depth, key=lambda r: r["logistic"]["balanced_accuracy"])
    null = best["shuffled_labels"]
    z = (best["logistic"]["balanced_accuracy"] - null["balanced_accuracy"]) / max(null["balanced_accuracy_std"], 1e-12)
    return {"per_depth": per_depth, "best_logistic_depth": best["depth"],
            "best_logistic": best["logistic"], "chance": best["chance"], "shuffled_labels_at_best": null,
            # how many shuffled-label standard deviations the best depth's probe sits above their mean
            # (the best of several depths, so read it as an upper bound)
            "best_logistic_z_vs_shuffled": z}


def family_metrics(seed: int, spectra: Mapping, trajectories: Mapping, probes: Mapping, hull: Mapping,
                   alignment: Mapping | None = None) -> dict:
    """metrics/attention.json: each part's summary with the source's claim beside it; ``hull``:
    :func:`summarize_hull`; ``alignment``: the final state against the next token's embedding row in the original
    and the tied variant (rule next_token_alignment), where the preset trains the variant."""
    return {
        "seed": seed,
        "depth_convention": "depth 0 = embedding output, depth d = output of block d (blocks counted from 1); "
                            "blocks and heads in head entries are 0-based",
        "spectra": {**spectra, "source": SOURCE_CLAIMS["spectra"]},
        "odds_ratio_source": SOURCE_CLAIMS["odds_ratio"],
        "trajectories": {**trajectories, "source": SOURCE_CLAIMS["trajectories"]},
        "probes": {**probes, "source": SOURCE_CLAIMS["probes"]},
        "convex_hull": {**hull, "source": SOURCE_CLAIMS["convex_hull"]},
        **({"tied_embeddings": {**alignment, "source": SOURCE_CLAIMS["tied"]}} if alignment is not None else {}),
    }


def findings(documents: Mapping) -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings). Blocks and heads counted from 1 (the
    metrics' head entries count from 0). ``documents``: ``attention`` (metrics/attention.json)."""
    doc = documents["attention"]
    depths = get(doc, "trajectories", "per_depth")
    last = depths[-2] if len(depths) > 1 else depths[-1]  # the last block before the final state
    first = depths[0]
    better = sum(get(d, "tuned_kl_mean") < get(d, "logit_kl_mean") for d in depths[:-1])
    out = [f"The tuned lens is closer to the final distribution than the logit lens at {better} of {len(depths) - 1} "
           f"depths (mean KL {num(get(first, 'tuned_kl_mean'), 2)} against {num(get(first, 'logit_kl_mean'), 2)} nats at "
           f"the embedding, {num(get(last, 'tuned_kl_mean'), 2)} against {num(get(last, 'logit_kl_mean'), 2)} after "
           f"block {get(last, 'depth')})."]
    final = depths[-1]
    vocab = get(doc, "trajectories", "vocab_size")
    out.append(f"The final state points at the next token's unembedding row (mean cosine "
               f"{num(get(final, 'cos_unembed_mean'), 2)}, mean rank {num(get(final, 'cos_unembed_rank_mean'), 2)} of "
               f"{vocab}), not at its input embedding row (mean cosine {num(get(final, 'cos_embed_mean'), 2)}, mean rank "
               f"{num(get(final, 'cos_embed_rank_mean'), 2)}; chance {num((vocab + 1) / 2, 2)}).")
    tied = doc.get("tied_embeddings") if isinstance(doc, dict) else None
    if tied is not None:
        out.append(_tied_sentence(tied))
    most = get(doc, "spectra", "most_self_attention", 0)
    slowest = get(doc, "spectra", "absorption", "slowest")
    out.append(f"The most self-attending head is block {block(get(most, 'block'))}, head {block(get(most, 'head'))} "
               f"(mean diagonal {num(get(most, 'diag_mean'), 2)}); the backward walk is half absorbed after a median "
               f"{num(get(doc, 'spectra', 'absorption', 'half_absorption_median'), 3)} steps, the slowest head after "
               f"{num(slowest['half_absorption_mean'], 3)}.")
    best = get(doc, "probes", "best_logistic")
    chance = get(doc, "probes", "chance")
    z = get(doc, "probes", "best_logistic_z_vs_shuffled")
    verdict = ("above the shuffled-label control by more than two of its standard deviations" if z > 2 else
               "not above the shuffled-label control by two of its standard deviations")
    depth = get(doc, "probes", "best_logistic_depth")  # 0: the embedding, d: after block d
    where = "at the embedding" if depth == 0 else f"after block {depth}"
    out.append(f"The best speaker probe reaches a balanced accuracy of {percent(get(best, 'balanced_accuracy'))} {where} "
               f"(chance {percent(get(chance, 'balanced_accuracy'))}): "
               f"{verdict} (z = {num(z, 2)}, the best of the depths, so an upper bound).")
    hull = doc.get("convex_hull") if isinstance(doc, dict) else None
    if hull is not None:
        counts = get(hull, "verdicts", "shuffled")
        out.append(f"Source 001's convex-hull reading (the attention-weighted mean of a head's values nearer the next "
                   f"position's value than with shuffled attention, by 1.96 standard errors over windows) holds for "
                   f"{counts['holds']} of {get(hull, 'n_heads')} heads, fails for {counts['fails']}, and cannot be told "
                   f"for {counts['undecided']}.")
    return out


def _tied_sentence(tied: Mapping) -> str:
    """Source 001's premise in the untied original and the tied variant: the cosine against 0, the rank against
    chance, each with its test."""
    def part(name: str) -> str:
        e = get(tied, "models", name, "cos_embed")
        angle = math.degrees(math.acos(max(-1.0, min(1.0, get(e, "cosine", "mean")))))
        return (f"the cosine is {stated(get(e, 'cosine'), 'above 0', 'below 0', 'no different from 0')}, an angle of "
                f"{num(angle, 3)} degrees, and the mean rank "
                f"{stated(get(e, 'rank'), 'above chance', 'below chance', 'no different from chance')}")

    chance = get(tied, "models", "untied", "chance_rank")
    return ("Source 001's premise that the final state points at the next token's embedding presumes tied "
            f"embeddings, and our models are untied; between the final state and the next token's embedding row "
            f"(t-tests over {num(get(tied, 'models', 'untied', 'positions'))} validation positions; chance rank "
            f"{num(chance, 2)} of {get(tied, 'models', 'untied', 'vocab_size')}), in the untied model "
            f"({trained(get(tied, 'models', 'untied', 'training'))}) " + part("untied") + "; in the tied variant "
            f"({trained(get(tied, 'models', 'tied', 'training'))}) " + part("tied") + ".")


def paired(real: np.ndarray, baseline: np.ndarray) -> dict:
    """Mean of ``baseline - real`` over windows with its standard error and the verdict: ``holds``
    when it exceeds 1.96 SE (real attention nearer the next value), ``fails`` when below -1.96 SE."""
    d = np.asarray(baseline, dtype=np.float64) - np.asarray(real, dtype=np.float64)
    n = len(d)
    se = standard_error(d)
    mean = float(d.mean()) if n else float("nan")
    verdict = "undecided"
    if n > 1 and se > 0:
        verdict = "holds" if mean > 1.96 * se else ("fails" if mean < -1.96 * se else "undecided")
    elif n > 1 and mean != 0:
        verdict = "holds" if mean > 0 else "fails"
    return {"difference": round(mean, 6), "se": round(se, 6), "n_windows": n, "verdict": verdict}


def summarize_hull(cols: Mapping[str, np.ndarray]) -> dict:
    """Per (block, head): the mean potential and cosine of each weighting over windows and the paired
    tests against both baselines; a count of heads per verdict; the largest identity error."""
    block, head = np.asarray(cols["block"]), np.asarray(cols["head"])
    heads = []
    for b, h in sorted(set(zip(block.tolist(), head.tolist()))):
        sel = (block == b) & (head == h)
        entry = {"block": b, "head": h}
        for w in WEIGHTINGS:
            entry[f"{w}_potential"] = round(float(np.mean(cols[f"{w}_potential"][sel])), 6)
            entry[f"{w}_cosine"] = round(float(np.mean(cols[f"{w}_cosine"][sel])), 6)
        for w in ("shuffled", "uniform"):
            entry[f"vs_{w}"] = paired(cols["real_potential"][sel], cols[f"{w}_potential"][sel])
        heads.append(entry)
    count = {w: {v: sum(e[f"vs_{w}"]["verdict"] == v for e in heads) for v in ("holds", "fails", "undecided")}
             for w in ("shuffled", "uniform")}
    return {"heads": heads, "verdicts": count, "n_heads": len(heads),
            "identity_max_error": float(np.max(cols["identity_error"])) if len(heads) else None,
            "definition": "potential = |v_{t+1} - sum_j A_tj v_j|^2 / |v_{t+1}|^2 per head, mean over positions "
                          "t < T - 1 of each validation window; holds = shuffled minus real potential above "
                          "1.96 standard errors over windows"}
