"""The runs read back, each run's verdict, and metrics/phase_change.json (method.md §8b)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from tinylens.dynamics.phases import ie_kl_phases
from tinylens.phase_change.data import MixtureSettings
from tinylens.phase_change.detect import DetectSettings, detect, uniform_prefix_matching
from tinylens.phase_change.schemas import HEADS_SCHEMA, curves_schema
from tinylens.tables import read_columns
from tinylens.wording import get, num


def run_settings(base: dict, overrides: dict) -> dict:
    """One run's settings: ``phase_change.base`` with the run's keys over it (``mixture`` merged key by key)."""
    unknown = sorted(set(overrides) - set(base) - {"seed"})
    if unknown:
        raise ValueError(f"phase_change.runs: unknown keys {unknown}; a run may set {sorted(base)} and seed")
    merged = {**base, **overrides}
    merged["mixture"] = {**base["mixture"], **overrides.get("mixture", {})}
    return merged


def best_head_curves(heads: dict[str, np.ndarray]) -> tuple[tuple[int, int], dict[str, np.ndarray]]:
    """The head with the largest final prefix-matching score (mean over probe periods), and its
    curves over the checkpoints: prefix matching and its standard error (the periods' combined),
    copying."""
    steps = np.unique(heads["step"])
    last = heads["step"] == steps[-1]
    keys = sorted({(int(layer), int(h)) for layer, h in zip(heads["layer"], heads["head"])})
    final = {k: heads["prefix_matching"][last & (heads["layer"] == k[0]) & (heads["head"] == k[1])].mean() for k in keys}
    best = max(keys, key=lambda k: final[k])
    mine = (heads["layer"] == best[0]) & (heads["head"] == best[1])
    out = {"prefix_matching": [], "prefix_matching_se": [], "copying": []}
    for s in steps:
        rows = mine & (heads["step"] == s)
        out["prefix_matching"].append(heads["prefix_matching"][rows].mean())
        out["prefix_matching_se"].append(np.sqrt((heads["prefix_matching_se"][rows] ** 2).sum()) / rows.sum())
        out["copying"].append(heads["copying"][rows][0])
    return best, {k: np.asarray(v) for k, v in out.items()}


def load_run(curves_path: str | Path, heads_path: str | Path, context: int) -> tuple[dict, dict]:
    """A run's curves and heads tables as columns."""
    return read_columns(curves_path, curves_schema(context)), read_columns(heads_path, HEADS_SCHEMA)


def summarize_run(name: str, settings: dict, curves: dict, heads: dict, detect_settings: DetectSettings) -> dict:
    """One run's entry of metrics/phase_change.json."""
    periods = sorted({int(p) for p in heads["period"]})
    uniform = float(np.mean([uniform_prefix_matching(settings["context"], p) for p in periods]))
    best, head_curves = best_head_curves(heads)
    verdict = detect({**curves, **head_curves}, uniform, detect_settings)
    steps = curves["step"]
    i0 = int(np.flatnonzero(steps <= verdict["window"]["start"] + 1e-9)[-1])
    i1 = int(np.flatnonzero(steps >= min(verdict["window"]["end"], steps[-1]) - 1e-9)[0])
    phases = ie_kl_phases(steps, curves["energy"], curves["kl_unigram"], detect_settings.smooth_decades,
                          detect_settings.min_swing)
    mixture = MixtureSettings(**settings["mixture"])
    return {
        "setting": {"layers": settings["n_layer"], "width": settings["d_model"], "heads": settings["n_head"],
                    "context": settings["context"], "batch_size": settings["batch_size"], "steps": settings["steps"],
                    "lr": settings["lr"], "schedule": settings["schedule"], "data": mixture.label,
                    "mixture": asdict(mixture), "seed": settings["seed"]},
        **verdict,
        "best_head": {"layer": best[0], "head": best[1], "probe_periods": periods,
                      "final_prefix_matching": float(head_curves["prefix_matching"][-1]),
                      "final_prefix_matching_se": float(head_curves["prefix_matching_se"][-1]),
                      "uniform_prefix_matching": uniform,
                      "final_copying": float(head_curves["copying"][-1])},
        "final_icl": {"natural_text_band": float(curves["final_icl"][-1]),
                      "natural_text_band_se": float(curves["final_icl_se"][-1]),
                      "natural_text_single_position": float(curves["final_icl_single"][-1]),
                      "natural_text_single_position_se": float(curves["final_icl_single_se"][-1]),
                      "training_distribution_band": float(curves["mixture_icl"][-1]),
                      "training_distribution_band_se": float(curves["mixture_icl_se"][-1])},
        "natural_icl_across_window": {"start": float(curves["icl"][i0]), "end": float(curves["icl"][i1]),
                                      "change": float(curves["icl"][i1] - curves["icl"][i0]),
                                      "change_se": float(np.hypot(curves["icl_se"][i0], curves["icl_se"][i1]))},
        "final_losses": {"natural_text": float(curves["val_loss"][-1]),
                         "training_distribution": float(curves["mixture_loss"][-1])},
        "seed_000_phases": {k: phases[k] for k in ("phase_1", "phase_2", "phase_3", "unigram_step", "ie_minimum_step")},
        "cpu_seconds": float(curves["cpu_seconds"][-1]),
    }


def compare(runs: dict[str, dict], reference: str) -> dict:
    """Each run's window against the reference run's, in tokens (the controls' verdicts)."""
    ref = runs[reference]
    out = {}
    for name, r in runs.items():
        both = r["phase_change_detected"] and ref["phase_change_detected"]
        out[name] = {"phase_change_detected": r["phase_change_detected"],
                     "peak_tokens": r["window"]["peak_tokens"],
                     "peak_tokens_over_reference": (r["window"]["peak_tokens"] / ref["window"]["peak_tokens"])
                     if both else None}
    return {"reference": reference, "runs": out}


def summary(runs: dict[str, dict], reference: str, detect_settings: DetectSettings) -> dict:
    """metrics/phase_change.json: every run, which detected a phase change, the controls' verdicts."""
    return {
        "runs": runs,
        "detected": sorted(n for n, r in runs.items() if r["phase_change_detected"]),
        "controls": compare(runs, reference),
        "detect": asdict(detect_settings),
        "cpu_seconds_all_runs": float(sum(r["cpu_seconds"] for r in runs.values())),
        "seed_000_phase_3_in": sorted(n for n, r in runs.items() if r["seed_000_phases"]["phase_3"]),
    }


def load_runs(names, curves_paths, heads_paths, summary: dict) -> tuple[dict, dict]:
    """The named runs' curves and their best heads' curves (the head the summary chose), by name."""
    curves, heads = {}, {}
    for name, curves_path, heads_path in zip(names, curves_paths, heads_paths, strict=True):
        if name not in summary["runs"]:
            raise ValueError(f"run {name!r} is not in metrics/phase_change.json (runs: {sorted(summary['runs'])}); "
                             "rerun phase_change_summary")
        curves[name], table = load_run(curves_path, heads_path, summary["runs"][name]["setting"]["context"])
        heads[name] = best_head_curves(table)[1]
    return curves, heads


#: How a control run differs from the reference, in words (the setting keys a run may override).
_DIFFERENCES = {"layers": "{} layers", "width": "width {}", "schedule": "{} learning rate", "context": "context {}",
                "lr": "lr {}", "steps": "{} steps", "heads": "{} heads", "data": "{}"}


def _difference(run: dict, reference: dict) -> str:
    """What sets a run apart from the reference run: its differing settings, or its seed."""
    changed = [fmt.format(run["setting"][k]).replace("1 layers", "1 layer") for k, fmt in _DIFFERENCES.items()
               if run["setting"][k] != reference["setting"][k]]
    return ", ".join(changed) or f"seed {run['setting']['seed']}"


def findings(documents: dict) -> list[str]:
    """The experiment's sentences of the run's findings (tinylens.findings): in which runs a phase change was
    detected, the reference run's window and best head, the controls, the natural-text ICL score across the
    window, seed 000's phase 3. Layers and heads 0-based. ``documents``: ``phase_change``
    (metrics/phase_change.json)."""
    doc = documents["phase_change"]
    runs = get(doc, "runs")
    name = get(doc, "controls", "reference")
    ref = get(runs, name)
    detected = get(doc, "detected")
    out = [f"On the experiment's data ({get(ref, 'setting', 'data')}: a labelled second dataset), a phase change is detected by code in "
           f"{len(detected)} of {len(runs)} runs" + (f" ({', '.join(detected)})." if detected else ".")]
    head, w = get(ref, "best_head"), get(ref, "window")
    setting = get(ref, "setting")
    where = (f"the {setting['layers']}-layer, width-{setting['width']} reference run ({name})")
    if get(ref, "phase_change_detected"):
        out.append(f"In {where} induction heads form between steps {num(w['start'])} and {num(w['end'])} "
                   f"(peak at step {num(w['peak'])}, {num(w['peak_tokens'])} tokens): the best head (layer "
                   f"{head['layer']}, head {head['head']}) ends at a prefix-matching score of "
                   f"{num(head['final_prefix_matching'])} +- {num(head['final_prefix_matching_se'], 2)} on probes "
                   f"repeating at periods {', '.join(map(str, head['probe_periods']))} (a uniform head: "
                   f"{num(head['uniform_prefix_matching'])}) and a copying score of {num(head['final_copying'])}, "
                   f"and the loss curve bumps in the window (z = {num(get(ref, 'loss_bump', 'z'), 2)}).")
    else:
        out.append(f"No phase change is detected in {where}: its best head ends at a prefix-matching score of "
                   f"{num(head['final_prefix_matching'])} against a uniform head's "
                   f"{num(head['uniform_prefix_matching'])}.")
    controls = []
    for other, verdict in get(doc, "controls", "runs").items():
        if other == name:
            continue
        run = runs[other]
        text = f"{_difference(run, ref)} ({other}): "
        if verdict["phase_change_detected"]:
            ratio = verdict["peak_tokens_over_reference"]
            text += "detected" + (f", peak at {num(ratio, 2)} times the reference's tokens" if ratio else "")
        else:
            text += (f"none detected (best prefix matching {num(run['best_head']['final_prefix_matching'])} against "
                     f"{num(run['best_head']['uniform_prefix_matching'])})")
        controls.append(text)
    if controls:
        out.append("The other runs: " + "; ".join(controls) + ".")
    across = get(ref, "natural_icl_across_window")
    change, change_se = across["change"], across["change_se"]
    moved = abs(change) > 2 * change_se
    out.append(f"The in-context-learning score on natural text goes from {num(across['start'])} to "
               f"{num(across['end'])} nats across the reference run's window (change {num(change)} +- "
               f"{num(change_se, 2)}): " + ("it moves by more than two standard errors" + (
                   ", upwards: the model comes to expect the text to repeat." if change > 0 else ", downwards.")
                   if moved else "no change beyond two standard errors."))
    phase_3 = get(doc, "seed_000_phase_3_in")
    widths = sorted({r["setting"]["width"] for r in runs.values()})
    out.append("Seed 000's phase 3 (the interaction energy rising again while the KL stays high) appears in "
               + (", ".join(phase_3) if phase_3 else "none of the runs")
               + f" (widths {', '.join(map(str, widths))}).")
    return out
