"""The family's metrics JSON: every headline number of ours beside the paper's (method.md §7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tinylens import published
from tinylens.measures import describe, mean_test, share_test
from tinylens.supporting.contributions import ROUGHLY_SAME_DIRECTION, contributions_section
from tinylens.wording import block, get, grouped, num, stated
from tinylens.wording import direction as direction_of


def ablation_section(summary: Mapping, n_blocks: int) -> dict:
    """``summary``: :func:`summarize_ablation`. Adds, per mode, a per-block table (blocks 0-based)
    with the paper's means beside ours (mean over seeds; the paper's table is the one-token variant)."""
    comparison = {}
    for mode, contexts in summary.items():
        rows = []
        for b in range(n_blocks):
            row = {"block": b}  # 0-based, as in every metrics file and table
            for variant in ("drop_sa", "drop_ffwd"):
                row[f"paper_{variant}"] = published.ABLATION[variant].get(b)
                for context, variants in contexts.items():
                    entry = variants[variant]
                    row[f"{context}_{variant}"] = entry["mean"][b]
                    row[f"{context}_{variant}_seed_range"] = [entry["seed_min"][b], entry["seed_max"][b]]
            rows.append(row)
        comparison[mode] = rows
    return {"paper": {v: {str(b): x for b, x in d.items()} for v, d in published.ABLATION.items()},
            "paper_context": published.ABLATION_CONTEXT, "comparison": comparison, "modes": dict(summary)}


def ablation_differences(tables: Mapping[int, Mapping[str, np.ndarray]]) -> dict:
    """The claim that the feed-forward term has the larger impact, as a paired test per block: per seed, d =
    H(drop_ffwd) - H(drop_sa) on the same prompts (:func:`tinylens.measures.mean_test` over prompts), and over
    the seeds the t-test of their mean differences against 0 (the seeds' spread decides the block's verdict).
    ``tables``: seed -> columns of its ablation table. Returns ``{mode: {context: [one record per block,
    0-based: {"block", "per_seed": {seed: test}, "over_seeds": test}]}}``."""
    per_seed: dict = {}
    for seed, t in tables.items():
        mode, context, variant = (np.asarray(t[k]) for k in ("mode", "context", "variant"))
        ids, h = np.asarray(t["prompt_id"]), np.asarray(t["hellinger"], dtype=np.float64)
        for m, c in sorted(set(zip(mode, context))):
            rows = {}
            for v in ("drop_sa", "drop_ffwd"):
                sel = np.flatnonzero((mode == m) & (context == c) & (variant == v))
                order = sel[np.argsort(ids[sel], kind="stable")]
                rows[v] = (ids[order], h[order])
            if not np.array_equal(rows["drop_sa"][0], rows["drop_ffwd"][0]):
                raise ValueError(f"seed {seed}, {m} mode, {c}: the two variants were not run on the same prompts")
            per_seed.setdefault(m, {}).setdefault(c, {})[str(seed)] = rows["drop_ffwd"][1] - rows["drop_sa"][1]
    out: dict = {}
    for m, contexts in per_seed.items():
        for c, seeds in contexts.items():
            n_blocks = next(iter(seeds.values())).shape[1]
            out.setdefault(m, {})[c] = [
                {"block": b, "per_seed": {seed: mean_test(d[:, b]) for seed, d in seeds.items()},
                 "over_seeds": mean_test([d[:, b].mean() for d in seeds.values()])}
                for b in range(n_blocks)]
    return out


def criterion_section(per_mode: Mapping[str, Mapping], n_blocks: int) -> dict:
    """``per_mode``: the criterion rule's summaries. Adds per mode a per-block table (blocks from the
    last, as the paper lists them) with the paper's rates beside ours, and the chance levels."""
    comparison = {}
    for mode, s in per_mode.items():
        rows = []
        own, thresholds = s.get("block_alone", {}), s.get("thresholds", {})  # criterion files of earlier runs have none
        for b in reversed(range(n_blocks)):
            entry = s["blocks"][str(b)]
            row = {"block": b, "paper_end_of_model": published.CRITERION_END_OF_MODEL.get(b),
                   "paper_same_stage": published.CRITERION_SAME_STAGE.get(b)}
            # at the threshold tuned for the block alone (method.md §6b), beside the joint tuning's rates below
            alone = own.get(str(b), {}).get("end_of_model", {})
            if "rate_abs" in alone:
                row["joint_threshold"], row["block_alone_threshold"] = (thresholds[k][b] for k in ("joint", "block_alone"))
                row["end_of_model_abs_block_alone"] = alone["rate_abs"]
                row["end_of_model_used_block_alone"] = alone["used"]
                row["end_of_model_permutation_null_abs_block_alone"] = alone["permutation_null_abs"]["mean"]
            for variant in ("end_of_model", "same_stage"):
                e = entry.get(variant)
                if e is None or "rate_abs" not in e:
                    continue
                row[f"{variant}_abs"] = e["rate_abs"]
                row[f"{variant}_signed"] = e["rate_signed"]
                row[f"{variant}_chance_exact"] = e["chance_exact"]
                row[f"{variant}_permutation_null_abs"] = e["permutation_null_abs"]["mean"]
                row[f"{variant}_permutation_null_abs_std"] = e["permutation_null_abs"]["std"]
                row[f"{variant}_used"] = e["used"]
                row[f"{variant}_empty"] = e["empty"]
                row[f"{variant}_excluded_unconverged"] = e.get("excluded_unconverged", 0)
            rows.append(row)
        comparison[mode] = rows
    return {"paper": {"end_of_model": {str(b): x for b, x in published.CRITERION_END_OF_MODEL.items()},
                      "same_stage": {str(b): x for b, x in published.CRITERION_SAME_STAGE.items()},
                      "chance_percent": list(published.CRITERION_CHANCE_PERCENT)},
            "comparison": comparison, "modes": dict(per_mode)}


def subspace_section(per_stage: Mapping[int, Mapping], n_layer: int, fits: Mapping[int, np.ndarray] | None = None) -> dict:
    """``per_stage``: :func:`summarize_stage` by stage. Adds the paper's
    check (sigma_1 > 6 sigma_2 for 'a' at the input of ln_f) beside ours, and, from ``fits`` (stage ->
    :func:`rank_fit`), the test that earlier stages fit worse even at higher rank."""
    end = per_stage.get(n_layer, {})
    token = published.SUBSPACE_SIGMA_RATIO["token"]
    ours = end.get("by_token", {}).get(token, {})
    return {
        "paper": {**published.SUBSPACE_SIGMA_RATIO, "not_reached": published.SUBSPACE_NOT_REACHED},
        "a_at_ln_f_input": {"sigma_ratio": ours.get("sigma_ratio"), "sigma_ratio_centred": ours.get("sigma_ratio_centred"),
                            "self_probability": ours.get("self_probability")},
        "stages": {str(s): dict(v) for s, v in per_stage.items()},
        "earlier_stages_fit_worse": earlier_stages_fit_worse(fits or {}, n_layer),
    }


def split_by_mode(columns: Mapping[str, Sequence], modes: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """A table's columns (with a ``mode`` column) as one set of columns per mode."""
    mode = np.asarray(columns["mode"])
    return {m: {k: np.asarray(v)[mode == m] for k, v in columns.items()} for m in modes}


def family_metrics(ablation: Mapping[int, Mapping[str, np.ndarray]], scaling: Mapping[str, dict],
                   noise: Mapping[str, dict], endpoint: Mapping[str, dict], stages: Mapping[int, Mapping],
                   criterion: Mapping[str, Mapping], n_blocks: int, contributions: Mapping[str, dict],
                   model: Mapping, fits: Mapping[int, np.ndarray] | None = None,
                   robustness: Mapping | None = None) -> dict:
    """The family's metrics JSON: the headline and one section per analysis, the paper's numbers
    beside ours. ``ablation``: each seed's table; ``scaling``, ``noise``, ``endpoint``, ``contributions``:
    per mode (as :func:`split_by_mode` gives); ``stages``: :func:`summarize_stage` of each stage;
    ``criterion``: each mode's criterion JSON; ``model``: the model's vocab_size, block_size, d_model
    and n_layer (the feed-forward parameter share); ``robustness``: the robustness JSON
    (:func:`tinylens.supporting.robustness.summarize`), kept as it is."""
    modes = list(scaling)
    sections = {
        "ablation": {**ablation_section(summarize_ablation(ablation), n_blocks),
                     "ffwd_minus_sa": ablation_differences(ablation)},
        "criterion": criterion_section(criterion, n_blocks),
        "token_subspaces": subspace_section(stages, n_blocks, fits),
        "final_layernorm": {"paper": published.FINAL_LAYERNORM,
                            "modes": {m: {"scaling": summarize_scaling(scaling[m]), "noise": summarize_noise(noise[m])}
                                      for m in modes}},
        "ffwd_endpoint": {m: summarize_endpoint(endpoint[m]) for m in modes},
        "attention_vs_ffwd": contributions_section(contributions, n_blocks, model),
        **({"robustness": dict(robustness)} if robustness is not None else {}),
    }
    return {"headline": headline(sections["ablation"], sections["criterion"], sections["token_subspaces"],
                                 {m: v["scaling"] for m, v in sections["final_layernorm"]["modes"].items()},
                                 sections["ffwd_endpoint"], list(stages), sections["attention_vs_ffwd"]),
            **sections}


def headline(ablation: Mapping, criterion: Mapping, subspaces: Mapping, scaling: Mapping, endpoint: Mapping,
             stages: Sequence[int], contributions: Mapping, mode: str = "corpus") -> dict[str, float | None]:
    """A flat table of the few numbers to look at first, on ``mode``'s prompts: by default the corpus mode, whose
    prompts are drawn from the searched strings as the paper's were (the comparison table reads the ``paper``
    mode, the paper's own prompt set). Blocks 0-based in the keys, as everywhere in the metrics."""
    out: dict[str, float | None] = {"ffwd_parameter_percent": contributions["ffwd_parameter_share"]["ours"]["percent"]}
    for row in contributions["modes"].get(mode, []):
        out[f"ffwd_sa_norm_ratio_median_block{row['block']}"] = row["norm_ratio"].get("median")
        out[f"ffwd_longer_share_block{row['block']}"] = row["ffwd_longer"]["share"]
        out[f"ffwd_closer_to_output_share_block{row['block']}"] = row["ffwd_closer_to_output"]["share"]
    for row in ablation["comparison"].get(mode, []):
        for key in ("one_token_drop_sa", "one_token_drop_ffwd", "full_drop_sa", "full_drop_ffwd"):
            out[f"ablation_{key}_block{row['block']}"] = row.get(key)
    for row in criterion["comparison"].get(mode, []):
        for key in ("end_of_model_abs", "same_stage_abs", "end_of_model_chance_exact",
                    "end_of_model_permutation_null_abs"):
            if key in row:
                out[f"criterion_{key}_block{row['block']}"] = row[key]
    out["subspace_a_sigma_ratio"] = subspaces["a_at_ln_f_input"]["sigma_ratio"]
    for s in stages:
        stage = subspaces["stages"][str(s)]
        out[f"subspace_stage{s}_sigma_ratio_median"] = stage["sigma_ratio"]["median"]
        out[f"subspace_stage{s}_tokens_reached"] = stage["tokens_reached"]
    for factor, entry in scaling.get(mode, {}).items():
        out[f"layernorm_x{factor}_max_hellinger"] = entry["max_hellinger"]
    for key in ("cosine", "norm_ratio", "hellinger"):
        out[f"ffwd_endpoint_{key}_mean"] = endpoint.get(mode, {}).get(key, {}).get("mean")
    return out


def summarize_ablation(tables: Mapping[int, Mapping[str, np.ndarray]]) -> dict:
    """Mean and std per block of every (mode, context, variant), per seed and over seeds.

    tables: seed -> columns of one seed's ablation table (``hellinger`` as ``[rows block]``).
    Returns ``{mode: {context: {variant: {"per_seed": {seed: {"mean": [...], "std": [...]}},
    "mean": [...], "seed_std": [...], "seed_min": [...], "seed_max": [...]}}}}`` (lists by block).
    """
    out: dict = {}
    for seed, t in tables.items():
        mode, context, variant = (np.asarray(t[k]) for k in ("mode", "context", "variant"))
        h = np.asarray(t["hellinger"], dtype=np.float64)
        for key in sorted(set(zip(mode, context, variant))):
            sel = (mode == key[0]) & (context == key[1]) & (variant == key[2])
            entry = out.setdefault(key[0], {}).setdefault(key[1], {}).setdefault(key[2], {"per_seed": {}})
            entry["per_seed"][str(seed)] = {"mean": _r(h[sel].mean(0)), "std": _r(h[sel].std(0)),
                                            "n_prompts": int(sel.sum())}
    for contexts in out.values():
        for variants in contexts.values():
            for entry in variants.values():
                means = np.array([s["mean"] for s in entry["per_seed"].values()])  # [seeds block]
                entry.update(mean=_r(means.mean(0)), seed_std=_r(means.std(0)), seed_min=_r(means.min(0)),
                             seed_max=_r(means.max(0)))
    return out


def _r(values) -> list[float]:
    return [round(float(v), 6) for v in np.atleast_1d(values)]


def summarize_scaling(cols: dict[str, np.ndarray]) -> dict:
    """Per factor: the largest deviations over the prompts, and the mean output norms (the paper's check)."""
    out = {}
    for c in np.unique(cols["factor"]):
        sel = cols["factor"] == c
        out[f"{c:g}"] = {
            "n_prompts": int(sel.sum()),
            "max_norm_deviation": float(np.abs(cols["output_norm_scaled"][sel] - cols["output_norm"][sel]).max()),
            "max_abs_deviation": float(cols["max_abs_deviation"][sel].max()),
            "max_eps_predicted_deviation": float(cols["eps_predicted_deviation"][sel].max()),
            "max_residual_deviation": float(cols["residual_deviation"][sel].max()),
            "max_hellinger": float(cols["hellinger"][sel].max()),
            "mean_output_norm": round(float(cols["output_norm"][sel].mean()), 6),
            "mean_output_norm_scaled": round(float(cols["output_norm_scaled"][sel].mean()), 6),
        }
    return out


def summarize_noise(cols: dict[str, np.ndarray]) -> dict:
    """Per noise level: mean (and spread) of the input cosine, the post-LayerNorm norm ratio and H."""
    out = {}
    for level in np.unique(cols["noise_level"]):
        sel = cols["noise_level"] == level
        entry = {"n_prompts": int(sel.sum())}
        for k in ("input_cosine", "input_norm_ratio", "output_norm_ratio", "output_cosine", "hellinger"):
            v = cols[k][sel]
            entry[k] = {"mean": round(float(v.mean()), 6), "std": round(float(v.std()), 6),
                        "min": round(float(v.min()), 6), "max": round(float(v.max()), 6)}
        out[f"{level:g}"] = entry
    return out


def summarize_endpoint(cols: dict[str, np.ndarray]) -> dict:
    """Mean, std and quartiles of each endpoint statistic (``sa_``: the attention-only endpoint), and the
    tests of the paper's reading: each endpoint shorter than x_7 (the sign test of the share of prompts
    with a norm ratio below 1), and the feed-forward-only endpoint nearer x_7 than the attention-only one
    in direction and in distribution (paired t-tests of the differences over prompts)."""
    keys = ("cosine", "norm_ratio", "hellinger")
    out = {k: describe(cols[k]) for k in keys}
    if "sa_cosine" not in cols:  # tables of earlier runs have no attention-only endpoint
        return out
    ratio, sa_ratio = (np.asarray(cols[k], dtype=np.float64) for k in ("norm_ratio", "sa_norm_ratio"))
    return {**out, **{f"sa_{k}": describe(cols[f"sa_{k}"]) for k in keys},
            "tests": {"ffwd_shorter": share_test(int((ratio < 1).sum()), len(ratio)),
                      "sa_shorter": share_test(int((sa_ratio < 1).sum()), len(sa_ratio)),
                      "cosine_ffwd_minus_sa": mean_test(np.asarray(cols["cosine"]) - np.asarray(cols["sa_cosine"])),
                      "hellinger_ffwd_minus_sa": mean_test(np.asarray(cols["hellinger"])
                                                           - np.asarray(cols["sa_hellinger"]))}}


def summarize_stage(cols: dict, target_nll: float, samples: int) -> dict:
    """How many tokens and samples reached the target, and the spread of the sigma ratios and of
    the self-probabilities over tokens, for one stage."""
    ratio = np.asarray(cols["sigma_ratio"], dtype=np.float64)
    centred = np.asarray(cols["sigma_ratio_centred"], dtype=np.float64)
    p_self = np.asarray(cols["self_probability"], dtype=np.float64)
    tokens = list(cols["token"])

    def spread(v):
        finite = v[np.isfinite(v)]
        q = np.percentile(finite, [0, 25, 50, 75, 100]) if len(finite) else [np.nan] * 5
        return {"min": _f(q[0]), "q25": _f(q[1]), "median": _f(q[2]), "q75": _f(q[3]), "max": _f(q[4]),
                "infinite": int((~np.isfinite(v)).sum())}

    converged = np.asarray(cols["converged"], dtype=bool)
    fit = rank_fit(np.asarray(cols["singular"], dtype=np.float64))
    return {
        "tokens": len(tokens),
        "samples_per_token": samples,
        "target_nll": target_nll,
        "tokens_reached": int(np.sum(cols["reached"])),
        "tokens_not_reached": [t for t, r in zip(tokens, cols["reached"]) if not r],
        "tokens_converged": int(converged.sum()),
        "tokens_not_converged": [t for t, c in zip(tokens, converged) if not c],
        "tokens_plateaued": int(np.sum(np.asarray(cols["plateau_step"]) >= 0)),
        "joint_nll": spread(np.asarray(cols["joint_nll"], dtype=np.float64)),
        # the share of the samples' squared norm the first r singular directions hold (1: a line fits exactly)
        "rank_fit": {str(r): spread(fit[:, r - 1]) for r in RANKS if r <= fit.shape[1]},
        "rank_fit_converged": {str(r): spread(fit[converged, r - 1]) for r in RANKS if r <= fit.shape[1]},
        "samples_reached": int(np.sum(cols["samples_reached"])),
        "sigma_ratio": spread(ratio),
        "sigma_ratio_centred": spread(centred),
        "sigma_ratio_above_6": int(np.sum(ratio > 6)),
        "self_probability": {**spread(p_self), "above_0.9": int(np.sum(p_self > 0.9)),
                             "above_0.99": int(np.sum(p_self > 0.99))},
        "by_token": {t: {"sigma_ratio": _f(r), "sigma_ratio_centred": _f(c), "self_probability": _f(p)}
                     for t, r, c, p in zip(tokens, ratio, centred, p_self)},
    }


#: Ranks whose fit (:func:`rank_fit`) each stage reports.
RANKS = (1, 2, 3)


def rank_fit(singular: np.ndarray) -> np.ndarray:
    """``[token r]``: the share of each token's samples' squared norm held by their first ``r`` uncentred
    singular directions, ``sum_{i<=r} s_i^2 / sum_i s_i^2``, for r = 1..min(K, d_model)."""
    sq = np.asarray(singular, dtype=np.float64) ** 2
    total = sq.sum(1, keepdims=True)
    return np.cumsum(sq, axis=1) / np.where(total > 0, total, 1.0)


def earlier_stages_fit_worse(per_stage_fit: Mapping[int, np.ndarray], n_layer: int, rank: int = 3) -> dict:
    """The paper's observation that earlier stages fit worse even at higher rank, as a test: per earlier
    stage, its tokens' rank-``rank`` fit against the end stage's rank-1 fit (one-sided Mann-Whitney U,
    alternative: the earlier stage's is lower). ``per_stage_fit``: stage -> :func:`rank_fit`."""
    from scipy.stats import mannwhitneyu

    end = per_stage_fit.get(n_layer)
    out = {}
    for stage, fit in sorted(per_stage_fit.items(), reverse=True):
        if stage == n_layer or end is None or fit.shape[1] < rank:
            continue
        test = mannwhitneyu(fit[:, rank - 1], end[:, 0], alternative="less")
        out[str(stage)] = {f"rank{rank}_fit_median": _f(np.median(fit[:, rank - 1])),
                           "end_rank1_fit_median": _f(np.median(end[:, 0])), "p_value": _f(test.pvalue),
                           "holds": bool(test.pvalue < 0.05)}
    return out


def _f(x) -> float | None:
    """JSON-safe float: None for inf/NaN."""
    x = float(x)
    return round(x, 6) if np.isfinite(x) else None


def findings(documents: Mapping[str, object], mode: str = "paper") -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings), on ``mode``'s prompts (the first
    mode of the metrics where it has none): each of source 002's supporting claims with its verdict and the
    test that decided it; blocks counted from 1. ``documents``: ``supporting`` (metrics/supporting.json)."""
    doc = documents["supporting"]
    comparison = get(doc, "ablation", "comparison")
    mode = mode if mode in comparison else next(iter(comparison))
    prompts = f"{mode} prompts" if mode != "paper" else "the paper's prompts"
    out = []
    blocks = get(comparison, mode)
    ffwd = [get(b, "one_token_drop_ffwd") for b in blocks]
    sa = [get(b, "one_token_drop_sa") for b in blocks]
    rows = get(doc, "ablation", "ffwd_minus_sa", mode, "one_token")
    seeds = len(get(rows[0], "per_seed"))
    out.append("Source 002's \"the feed-forward output always has the larger impact\": removing a block's feed-forward "
               "term moves the next-token distribution more than removing its attention term (the paper's one-token "
               f"variant, {prompts}; per block the mean Hellinger difference drop-ffwd minus drop-sa of each of the "
               f"{seeds} seeds, t-test over the seeds): "
               + grouped([(block(get(r, "block")), get(r, "over_seeds")) for r in rows], "larger", "smaller")
               + f"; in block 1 the mean distances are {num(ffwd[0], 2)} against {num(sa[0], 2)}.")
    versus = get(doc, "attention_vs_ffwd", "modes", mode)
    longer = [(block(get(r, "block")), get(r, "ffwd_longer")) for r in versus]
    held = sum(direction_of(t) == "above" for _, t in longer)
    out.append("Source 002's \"the feed-forward outputs are generally longer than the self-attention outputs\" (per "
               "block, the share of prompts with |ffwd_b| > |sa_b|, sign test against one half): the feed-forward "
               "output is " + grouped(longer, "longer", "shorter", what="share")
               + f"; the claim holds in {held} of {len(longer)} blocks.")
    same = [(block(get(r, "block")), get(r, "cos_ffwd_sa_against_same_direction")) for r in versus]
    zero = [(block(get(r, "block")), get(r, "cos_ffwd_sa_against_0")) for r in versus]
    held = sum(direction_of(t) == "above" for _, t in same)
    out.append("Source 002's \"within a block the two outputs point in roughly the same direction\" (read as a mean "
               f"cos(ffwd_b, sa_b) above {num(ROUGHLY_SAME_DIRECTION)}, an angle under 60 degrees; t-tests over "
               f"prompts) holds in {held} of {len(same)} blocks: against {num(ROUGHLY_SAME_DIRECTION)} the mean cosine "
               "is " + grouped(same, "above", "below") + "; against 0 it is " + grouped(zero, "above", "below") + ".")
    closer = sum(direction_of(get(r, "ffwd_closer_to_output")) == "above" for r in versus)
    share = get(doc, "attention_vs_ffwd", "ffwd_parameter_share", "ours", "percent")
    out.append(f"The feed-forward output is closer in direction than the attention output to the block's output in "
               f"{closer} of {len(versus)} blocks (sign test over prompts); it holds {num(share, 4)}% of the "
               f"parameters (the paper's model: {published.FFWD_SHARE['percent']}%).")
    endpoint = get(doc, "ffwd_endpoint")
    if mode in endpoint:
        e = get(endpoint, mode)
        tests = get(e, "tests")
        out.append(
            "Source 002's \"the feed-forward-only endpoint is shorter and closely aligned\": f = x_1 + sum_b ffwd_b "
            "against the real final residual x_7 is "
            + stated(get(tests, "ffwd_shorter"), "shorter", "longer", "no different in length",
                     what="share of prompts with |f| < |x_7|")
            + f" (mean norm ratio {num(get(e, 'norm_ratio', 'mean'))}); the attention-only endpoint a = x_1 + sum_b "
            "sa_b is " + stated(get(tests, "sa_shorter"), "shorter", "longer", "no different in length",
                                what="share of prompts with |a| < |x_7|")
            + f" (mean norm ratio {num(get(e, 'sa_norm_ratio', 'mean'))}). f points the way of x_7 (mean cosine "
            f"{num(get(e, 'cosine', 'mean'))}, against a's {num(get(e, 'sa_cosine', 'mean'))}): the paired difference "
            "cos(f, x_7) - cos(a, x_7) is " + stated(get(tests, "cosine_ffwd_minus_sa"), "above 0", "below 0",
                                                     "no different from 0")
            + f"; its distribution is {num(get(e, 'hellinger', 'mean'))} from the model's (mean Hellinger, against "
            f"a's {num(get(e, 'sa_hellinger', 'mean'))}), the paired difference "
            + stated(get(tests, "hellinger_ffwd_minus_sa"), "above 0", "below 0", "no different from 0") + ".")
    subspaces = get(doc, "token_subspaces")
    ratio = get(subspaces, "a_at_ln_f_input", "sigma_ratio")
    if ratio is not None:
        bound = published.SUBSPACE_SIGMA_RATIO["sigma_ratio_more_than"]
        centred = get(subspaces, "a_at_ln_f_input", "sigma_ratio_centred")
        stages = get(subspaces, "stages")
        spread = get(stages, max(stages, key=int), "sigma_ratio_centred")
        out.append(f"The token subspace of 'a' at the input of ln_f has sigma_1 / sigma_2 = {num(ratio)} by the "
                   f"uncentred SVD, the one the paper's 6 is of (its notebooks do not centre the samples): "
                   f"{'above' if ratio > bound else 'not above'} the paper's {num(bound)}; centred it is {num(centred)} "
                   f"(every token's centred ratio lies between {num(get(spread, 'min'))} and {num(get(spread, 'max'))}): "
                   "the learned samples lie in a cloud away from the origin, whose first uncentred direction is its "
                   "mean, not along a line.")
    if isinstance(doc, dict) and "robustness" in doc:  # metrics of earlier runs have no robustness section
        from tinylens.supporting.robustness import findings_sentence

        out.append(findings_sentence(get(doc, "robustness")))
    rows = get(doc, "criterion", "comparison", mode)
    last = next((r for r in rows if "end_of_model_abs" in r), None)
    if last is not None:
        rate, null = get(last, "end_of_model_abs"), get(last, "end_of_model_permutation_null_abs")
        sd = get(last, "end_of_model_permutation_null_abs_std")
        relation = "above" if rate > null + 2 * sd else "below" if rate < null - 2 * sd else "within two standard deviations of"
        used, left_out = get(last, "end_of_model_used"), get(last, "end_of_model_excluded_unconverged")
        out.append(f"The criterion (every top token within the first half by |cos|) holds for {num(rate, 3)}% of the "
                   f"{num(used)} prompts at block {block(get(last, 'block'))} with end-of-model subspaces "
                   f"({num(left_out)} left out for a top token whose subspace did not converge), {relation} its "
                   f"permutation null ({num(null, 3)}% +- {num(sd, 2)}).")
    own = sorted((r for r in rows if "end_of_model_abs_block_alone" in r), key=lambda r: get(r, "block"))
    if own:  # criterion files of earlier runs have no block-alone rates
        out.append(f"At each block's own best threshold (where the block alone approximates the model best on the "
                   f"tuning prompts: {', '.join(num(get(r, 'block_alone_threshold')) for r in own)}) instead of the "
                   f"jointly tuned one ({', '.join(num(get(r, 'joint_threshold')) for r in own)}), the criterion holds "
                   f"for " + ", ".join(f"{num(get(r, 'end_of_model_abs_block_alone'), 3)}%" for r in own)
                   + f" of the {mode} prompts at blocks {get(own[0], 'block') + 1} to {get(own[-1], 'block') + 1} "
                   f"(at the joint thresholds: " + ", ".join(f"{num(get(r, 'end_of_model_abs'), 3)}%" for r in own)
                   + ", end-of-model subspaces).")
    end = get(doc, "token_subspaces", "stages")
    last = end[max(end, key=int)] if end else {}
    if "tokens_converged" in last:
        out.append(f"At the input of ln_f, {get(last, 'tokens_converged')} of {get(last, 'tokens')} token subspaces "
                   f"converged ({get(last, 'tokens_reached')} reached the target NLL, the rest stopped on the plateau "
                   f"rule); prompts whose top tokens did not converge are left out of the criterion.")
    return out
