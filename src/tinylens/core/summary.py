"""The core's summaries (method.md §6): one prompt mode's evaluation summary, every mode side by side with the
paper's reference, the headline numbers ``dvc metrics show`` prints, and the core's sentences of the run's
findings. Free of torch: the summary jobs and the findings only read tables and JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tinylens import published
from tinylens.core.approx import split_masks
from tinylens.measures import describe, standard_error_of
from tinylens.wording import get, num, span


def evaluation_summary(columns: Mapping[str, np.ndarray], splits, in_train: np.ndarray, alternates: Sequence[int],
                       tuned: Mapping, mode: str, tuned_with: str | None = None, blocks: list | None = None) -> dict:
    """Summary of one mode on the evaluation prompts: the approximation, the paper's values, the alternates,
    and the approximation split by whether the prompt occurs verbatim in the train text. ``tuned_with``:
    the mode whose tuning prompts gave ``tuned`` (default ``mode`` itself); ``blocks``: each block's share and
    each block alone (:func:`tinylens.core.controls.block_shares`), kept as they are."""
    on_eval = split_masks(splits)["eval"]
    h = np.asarray(columns["hellinger_approx"])
    seen = np.asarray(in_train, dtype=bool)
    summary = {
        "mode": mode,
        "split": "eval",
        "approximation": describe(h[on_eval]),
        "alternates": {str(s): describe(columns[f"hellinger_seed{s}"][on_eval]) for s in alternates},
        "no_match_prompts": int(np.asarray(columns["no_match"])[on_eval].sum()),
        # Prompts that occur verbatim in the train text match themselves among the searched strings.
        "verbatim_in_train": {
            "share": round(float(seen[on_eval].mean()), 6) if on_eval.any() else None,
            "approximation_in_train": describe(h[on_eval & seen]),
            "approximation_not_in_train": describe(h[on_eval & ~seen]),
        },
        "thresholds": list(tuned["thresholds"]),
        "weights": list(tuned["weights"]),
        "tuned_with": tuned_with or mode,
        **({"blocks": list(blocks)} if blocks is not None else {}),
    }
    if not np.isnan(columns["hellinger_paper_values"]).all():
        summary["paper_values"] = describe(np.asarray(columns["hellinger_paper_values"])[on_eval])
    return summary


def headline(per_mode: dict[str, dict], training: dict) -> dict[str, float]:
    """metrics/headline.json: Hellinger means per mode and the validation losses, flat (the run's headline,
    what `dvc metrics show` prints, picks from it: :func:`tinylens.comparison.run_headline`)."""
    return {**side_by_side(per_mode)["headline"], "val_loss_original": training["val_loss_original"],
            "val_loss_mean": training["val_loss_mean"]}


def side_by_side(per_mode: dict[str, dict]) -> dict:
    """The headline numbers of every mode in one flat table, plus the per-mode details."""
    headline = {}
    for mode, s in per_mode.items():
        headline[f"{mode}_approximation_mean"] = s["approximation"]["mean"]
        headline[f"{mode}_approximation_std"] = s["approximation"]["std"]
        if "paper_values" in s:
            headline[f"{mode}_paper_values_mean"] = s["paper_values"]["mean"]
        alternates = [v["mean"] for v in s["alternates"].values()]
        if alternates:
            headline[f"{mode}_alternates_mean"] = round(float(np.mean(alternates)), 6)
        verbatim = s.get("verbatim_in_train")
        if verbatim and verbatim["share"] is not None:
            headline[f"{mode}_in_train_share"] = verbatim["share"]
            for group in ("in_train", "not_in_train"):
                if verbatim[f"approximation_{group}"]["n"]:
                    headline[f"{mode}_approximation_mean_{group}"] = verbatim[f"approximation_{group}"]["mean"]
    return {"headline": headline, "paper": published.APPROXIMATION_REFERENCE, "modes": per_mode}


def findings(documents: Mapping[str, object]) -> list[str]:
    """The core's sentences of the run's findings (tinylens.findings): the models' losses, the approximation
    against the model and the noise floor on the paper's prompts and on held-out prompts, and its controls.
    ``documents``: ``training`` (metrics/training.json), ``hellinger`` (metrics/hellinger.json), ``controls``
    (metrics/controls.json)."""
    models = get(documents["training"], "models")
    val = [get(m, "val_loss") for m in models.values()]
    steps = sorted({get(m, "steps") for m in models.values()})
    out = [f"{len(models)} models (seeds {', '.join(models)}) trained for {span(steps)} steps reach a validation "
           f"loss of {span(val, 4)} nats."]
    modes = get(documents["hellinger"], "modes")
    for mode, what in (("paper", "the paper's own prompts with the paper's thresholds and weights"),
                       ("heldout", "held-out prompts with thresholds and weights tuned on other held-out prompts")):
        if mode not in modes:
            continue
        h = get(modes, mode, "paper_values" if mode == "paper" else "approximation")
        mean, se = get(h, "mean"), standard_error_of(get(h, "std"), get(h, "n"))
        alternates = [get(a, "mean") for a in get(modes, mode, "alternates").values()]
        paper = (f"; the paper: {published.HELLINGER['mean']} over its {published.HELLINGER_PROMPTS:,} prompts"
                 if mode == "paper" else "")
        sentence = (f"On {get(h, 'n')} of {what}, the approximation's mean Hellinger distance from the model is "
                    f"{num(mean)} (standard error {num(se, 2)}{paper})")
        if alternates:
            floor = max(alternates)
            relation = ("further from the model than" if mean - 2 * se > floor else
                        "closer to the model than" if mean + 2 * se < min(alternates) else
                        "as close to the model as")
            sentence += (f"; a differently seeded model is {span(alternates)} away, so the approximation is "
                         f"{relation} another seed of the same model (by two standard errors)")
        out.append(sentence + ".")
    return out + controls_findings(get(documents, "controls"))


#: A verdict of method.md §6b in words: where the source stands against its reference (the ffwd_out search).
RELATION = {"ffwd_out better": "further from the model than", "ffwd_out worse": "closer to the model than",
            "no different": "not distinguishable from"}
#: The references of method.md §6b in words: ffwd_out over every string, or over the sample the vectors search.
REFERENCE_WORDS = {"ffwd_out": "the approximation", "ffwd_out_sample": "ffwd_out on the same sample"}
#: The sources of method.md §6b in the findings' words.
SOURCE_WORDS = {"suffix": "the suffix counts", "null": "the null", "sa_out": "sa_out", "block_input": "the block input",
                "block_output": "the block output", "ffwd_and_sa_out": "ffwd_out + sa_out"}


def _versus(source: Mapping) -> str:
    """A source's verdict with the paired test that gave it: relation to its reference, difference, 95% interval,
    p."""
    c = get(source, "versus_ffwd_out")
    return (f"{RELATION[get(source, 'verdict')]} {REFERENCE_WORDS[get(source, 'reference')]} (difference "
            f"{num(get(c, 'mean_difference'), 2)}, 95% interval {num(get(c, 'ci_low'), 2)} to "
            f"{num(get(c, 'ci_high'), 2)}, p = {num(get(c, 'p'), 2)})")


#: How ffwd_out and sa_out are joined, in the findings' words.
JOINED = " (twelve terms: each block's two, each with its own threshold and weight)"


def controls_findings(controls: Mapping) -> list[str]:
    """The controls' sentences (method.md §6b): on the held-out prompts each source's distance from the model and
    its verdict against the approximation, which sources the data favour and by how much; the verdicts on the
    paper's prompts; each block's weight, share and distance alone. Every verdict word is the paired t-test's."""
    settings, modes = get(controls, "settings"), get(controls, "modes")
    out = []
    held = get(modes, "heldout")
    src = get(held, "sources")
    seeds = [get(v, "mean") for k, v in src.items() if k.startswith("seed")]
    out.append(
        f"Is it the feed-forward outputs (method.md §6b)? On the {get(held, 'n')} held-out evaluation prompts, every "
        f"source tuned as the approximation is (mean Hellinger distance {num(get(src, 'ffwd_out', 'mean'))}) and paired "
        f"with it on the same prompts (difference of the distances, source minus approximation; paired t-test): the "
        f"suffix counts of the train text (no network: its strings ending in the prompt's last 1 to "
        f"{get(settings, 'suffix_lengths')} characters, weighted as the blocks are) are {num(get(src, 'suffix', 'mean'))} "
        f"from the model, {_versus(get(src, 'suffix'))}; the same search with the strings' next-token counts permuted "
        f"among them (the null) is {num(get(src, 'null', 'mean'))}, {_versus(get(src, 'null'))}"
        + (f"; another seed of the model is {span(seeds)}." if seeds else "."))
    sample = get(src, "ffwd_out_sample")
    vectors = [k for k in SOURCE_WORDS if k not in ("suffix", "null") and k in src]
    out.append(
        f"Searching a sample of {num(get(settings, 'sample_strings'))} of the {num(get(settings, 'of_strings'))} "
        f"strings, ffwd_out is {num(get(sample, 'mean'))}, {_versus(sample)}; with another vector of each block in "
        f"its place, on the same sample: "
        + "; ".join(f"{SOURCE_WORDS[k]}{JOINED if k == 'ffwd_and_sa_out' else ''} is {num(get(src, k, 'mean'))}, "
                    f"{_versus(get(src, k))}" for k in vectors) + ".")
    out.append(_favoured(src, [k for k in SOURCE_WORDS if k in src]))
    if "paper" in modes:
        paper = get(modes, "paper")
        verdicts = [f"{SOURCE_WORDS[k]}: {get(paper, 'sources', k, 'verdict')} "
                    f"(difference {num(get(paper, 'sources', k, 'versus_ffwd_out', 'mean_difference'), 2)})"
                    for k in SOURCE_WORDS if k in get(paper, "sources")]
        out.append(f"On the paper's {get(paper, 'n')} prompts (tuned on the corpus mode's tuning prompts; the "
                   f"approximation {num(get(paper, 'sources', 'ffwd_out', 'mean'))}) the verdicts are: "
                   + "; ".join(verdicts) + ".")
    blocks = get(held, "blocks")
    if blocks:
        top = max(blocks, key=lambda b: get(b, "weight"))
        alone = [get(b, "alone_at_own_threshold", "mean") for b in blocks]
        joint = [get(b, "alone_at_joint_threshold", "mean") for b in blocks]
        best = min(range(len(alone)), key=alone.__getitem__)
        out.append(
            f"The jointly tuned weights put {num(get(top, 'weight'), 2)} of the weight on block {get(top, 'block') + 1}, "
            f"whose matched counts make {num(get(top, 'effective_share'), 2)} of the weighted total on the average "
            f"held-out prompt; each block alone at its own best threshold is "
            + ", ".join(num(h, 3) for h in alone) + f" from the model (blocks 1 to {len(blocks)}; block {best + 1} "
            f"closest), and alone at the jointly tuned thresholds " + ", ".join(num(h, 3) for h in joint) + ".")
    return out


def _favoured(sources: Mapping, keys: Sequence[str]) -> str:
    """Which sources the held-out data favour over which, and by how much (the verdicts' differences)."""
    by = {v: [k for k in keys if get(sources, k, "verdict") == v] for v in ("ffwd_out better", "ffwd_out worse",
                                                                            "no different")}

    def listed(ks: Sequence[str]) -> str:
        names = [SOURCE_WORDS[k] for k in ks]
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + ("," if len(names) > 2 else "") + " and " + names[-1]

    def amount(ks: Sequence[str]) -> str:
        return span([abs(get(sources, k, "versus_ffwd_out", "mean_difference")) for k in ks], 2)

    parts = []
    if by["ffwd_out better"]:
        parts.append(f"favour ffwd_out over {listed(by['ffwd_out better'])} (by {amount(by['ffwd_out better'])} in "
                     "mean Hellinger distance)")
    if by["ffwd_out worse"]:
        parts.append(f"favour {listed(by['ffwd_out worse'])} over ffwd_out (by {amount(by['ffwd_out worse'])})")
    if by["no different"]:
        parts.append(f"cannot tell ffwd_out from {listed(by['no different'])} (differences of "
                     f"{amount(by['no different'])}, each 95% interval across 0)")
    return "On the held-out prompts the data " + ("; they ".join(parts) if parts else "give no verdict") + "."
