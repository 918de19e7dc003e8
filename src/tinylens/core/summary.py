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
                       tuned: Mapping, mode: str, tuned_with: str | None = None) -> dict:
    """Summary of one mode on the evaluation prompts: the approximation, the paper's values, the alternates,
    and the approximation split by whether the prompt occurs verbatim in the train text. ``tuned_with``:
    the mode whose tuning prompts gave ``tuned`` (default ``mode`` itself)."""
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
    """The core's sentences of the run's findings (tinylens.findings): the models' losses, and the
    approximation against the model and the noise floor on the paper's prompts and on held-out prompts.
    ``documents``: ``training`` (metrics/training.json), ``hellinger`` (metrics/hellinger.json)."""
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
    return out
