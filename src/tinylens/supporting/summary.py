"""The family's metrics JSON: every headline number of ours beside the paper's (method.md §7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinylens.supporting import published


def ablation_section(summary: Mapping, n_blocks: int) -> dict:
    """``summary``: :func:`tinylens.supporting.ablation.summarize`. Adds, per mode, a per-block table
    with the paper's means beside ours (mean over seeds; the paper's table is the one-token variant)."""
    comparison = {}
    for mode, contexts in summary.items():
        rows = []
        for b in range(n_blocks):
            row = {"block": b + 1}
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


def criterion_section(per_mode: Mapping[str, Mapping], n_blocks: int) -> dict:
    """``per_mode``: the criterion rule's summaries. Adds per mode a per-block table (blocks from the
    last, as the paper lists them) with the paper's rates beside ours, and the chance levels."""
    comparison = {}
    for mode, s in per_mode.items():
        rows = []
        for b in reversed(range(n_blocks)):
            entry = s["blocks"][str(b)]
            row = {"block": b + 1, "paper_end_of_model": published.CRITERION_END_OF_MODEL.get(b),
                   "paper_same_stage": published.CRITERION_SAME_STAGE.get(b)}
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
            rows.append(row)
        comparison[mode] = rows
    return {"paper": {"end_of_model": {str(b): x for b, x in published.CRITERION_END_OF_MODEL.items()},
                      "same_stage": {str(b): x for b, x in published.CRITERION_SAME_STAGE.items()},
                      "chance_percent": list(published.CRITERION_CHANCE_PERCENT)},
            "comparison": comparison, "modes": dict(per_mode)}


def subspace_section(per_stage: Mapping[int, Mapping], n_layer: int) -> dict:
    """``per_stage``: :func:`tinylens.supporting.subspaces.summarize_stage` by stage. Adds the paper's
    check (sigma_1 > 6 sigma_2 for 'a' at the input of ln_f) beside ours."""
    end = per_stage.get(n_layer, {})
    token = published.SUBSPACE_SIGMA_RATIO["token"]
    ours = end.get("by_token", {}).get(token, {})
    return {
        "paper": {**published.SUBSPACE_SIGMA_RATIO, "not_reached": published.SUBSPACE_NOT_REACHED},
        "a_at_ln_f_input": {"sigma_ratio": ours.get("sigma_ratio"), "sigma_ratio_centred": ours.get("sigma_ratio_centred"),
                            "self_probability": ours.get("self_probability")},
        "stages": {str(s): dict(v) for s, v in per_stage.items()},
    }


def headline(ablation: Mapping, criterion: Mapping, subspaces: Mapping, scaling: Mapping, endpoint: Mapping,
             stages: Sequence[int], mode: str = "corpus") -> dict[str, float | None]:
    """A flat table of the few numbers to look at first (the paper's prompt mode)."""
    out: dict[str, float | None] = {}
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
