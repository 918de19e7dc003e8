"""The runs read back, each seed's verdict, each run's over its seeds, and metrics/phase_change.json
(method.md §8b).

For every seed of every run (:func:`seed_evidence`, then :func:`seed_verdict`): the best head (the one
whose final prefix matching exceeds the uniform head's the most at its worst probe period), the window
and the curves' tests (:func:`tinylens.phase_change.detect.detect`), the mechanism's tests (zeroing the
best head against zeroing a control head of its layer; a previous-token head of the first layer forming in
or before the window; their K-composition rising across it), the verdict by the configured rule, the
natural-text ICL score across the window in both forms, the loss's non-convex stretches. Over the runs
(:func:`summarize`): which tests ever fail in a control (only those can decide), the verdicts over a grid
of thresholds, the repeated fraction and the width as curves, the second dataset beside the reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tinylens.dynamics.phases import ie_kl_phases
from tinylens.measures import standard_error
from tinylens.phase_change.data import MixtureSettings
from tinylens.phase_change.detect import (
    DetectSettings,
    ablation_test,
    composition_tests,
    detect,
    nonconvex_stretches,
    previous_token_test,
    uniform_prefix_matching,
    uniform_previous_token,
    verdict,
)
from tinylens.phase_change.schemas import COMPOSITION_SCHEMA, HEADS_SCHEMA, TESTS, curves_schema, run_settings
from tinylens.tables import read_columns
from tinylens.wording import get, num

__all__ = ["run_settings", "VerdictSettings", "load_run", "seed_evidence", "seed_verdict", "summarize", "findings"]


@dataclass(frozen=True)
class VerdictSettings:
    """Config ``phase_change.verdict``: the tests that decide (``rule``; the others are descriptive), and the
    threshold grid of the sensitivity table (``sensitivity``: ``min_rise`` and ``z`` lists)."""

    rule: tuple[str, ...]
    sensitivity: Mapping[str, Sequence[float]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", tuple(self.rule))
        unknown = sorted(set(self.rule) - set(TESTS))
        if unknown:
            raise ValueError(f"phase_change.verdict.rule: unknown tests {unknown}; the tests: {list(TESTS)}")


def _finite(x):
    """JSON-safe: NaN and infinities become None, NumPy scalars Python numbers."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def mean_se(values: Sequence[float]) -> dict:
    """Mean and standard error over seeds (``se`` None for one value) and their number."""
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if len(v) == 0:
        return {"mean": None, "se": None, "n": 0}
    return _finite({"mean": float(v.mean()), "se": standard_error(v), "n": int(len(v))})


# --- the tables read back -------------------------------------------------------------------------------


def load_run(curves_path, heads_path, composition_path, context: int) -> tuple[dict, dict, dict]:
    """A run's curves, heads and composition tables as columns."""
    return (read_columns(curves_path, curves_schema(context)), read_columns(heads_path, HEADS_SCHEMA),
            read_columns(composition_path, COMPOSITION_SCHEMA))


def _rows(table: Mapping[str, np.ndarray], **where) -> dict[str, np.ndarray]:
    mask = np.ones(len(next(iter(table.values()))), dtype=bool)
    for k, v in where.items():
        mask &= np.asarray(table[k]) == v
    return {k: np.asarray(v)[mask] for k, v in table.items()}


def seeds_of(curves: Mapping[str, np.ndarray]) -> list[int]:
    return sorted(int(s) for s in np.unique(curves["seed"]))


def _by_step(rows: Mapping[str, np.ndarray], key: str, steps: np.ndarray) -> np.ndarray:
    order = {int(s): i for i, s in enumerate(rows["step"])}
    return np.asarray(rows[key], dtype=np.float64)[[order[int(s)] for s in steps]]


def head_curves(heads: Mapping[str, np.ndarray], head: tuple[int, int], steps: np.ndarray, periods: list[int]) -> dict:
    """One head's curves over ``steps`` (one seed's heads table): per period ``prefix_matching`` and its
    ``_se``; over the periods ``previous_token`` and its ``_se`` (mean; combined standard error);
    ``copying``; at the last checkpoint the ablation raise pooled over the periods."""
    out: dict = {"prefix_matching": {}, "prefix_matching_se": {}}
    previous, previous_se, raises, raises_se = [], [], [], []
    for p in periods:
        rows = _rows(heads, layer=head[0], head=head[1], period=p)
        out["prefix_matching"][p] = _by_step(rows, "prefix_matching", steps)
        out["prefix_matching_se"][p] = _by_step(rows, "prefix_matching_se", steps)
        previous.append(_by_step(rows, "previous_token", steps))
        previous_se.append(_by_step(rows, "previous_token_se", steps))
        last = _by_step(rows, "ablation_raise", steps[-1:]), _by_step(rows, "ablation_raise_se", steps[-1:])
        raises.append(float(last[0][0]))
        raises_se.append(float(last[1][0]))
        if p == periods[0]:
            out["copying"] = _by_step(rows, "copying", steps)
    n = len(periods)
    out["previous_token"] = np.mean(previous, axis=0)
    out["previous_token_se"] = np.sqrt(np.sum(np.square(previous_se), axis=0)) / n
    out["ablation"] = (float(np.mean(raises)), float(np.sqrt(np.sum(np.square(raises_se))) / n))
    out["prefix_matching_mean"] = np.mean([out["prefix_matching"][p] for p in periods], axis=0)
    return out


def best_head(heads: Mapping[str, np.ndarray], uniform: Mapping[int, float], layer: int | None = None) -> tuple[int, int]:
    """The head (of ``layer``, or of any) whose prefix matching at the last checkpoint exceeds the uniform
    head's the most at its worst probe period (one seed's heads table)."""
    last = _rows(heads, step=int(np.max(heads["step"])))
    keys = sorted({(int(a), int(b)) for a, b in zip(last["layer"], last["head"]) if layer is None or a == layer})
    return max(keys, key=lambda k: worst_margin(last, k, uniform))


def worst_margin(last: Mapping[str, np.ndarray], key: tuple[int, int], uniform: Mapping[int, float]) -> float:
    mine = _rows(last, layer=key[0], head=key[1])
    return min(float(mine["prefix_matching"][mine["period"] == p].mean()) - u for p, u in uniform.items())


# --- one seed ------------------------------------------------------------------------------------------


def seed_evidence(settings: Mapping, curves: Mapping[str, np.ndarray], heads: Mapping[str, np.ndarray],
                  composition: Mapping[str, np.ndarray], seed: int) -> dict:
    """Everything one seed's verdict reads, whatever the thresholds: its curves, the best head's, the
    control head's ablation, the previous-token head's curve, their K-composition curve."""
    c = _rows(curves, seed=seed)
    c = {k: v[np.argsort(c["step"])] for k, v in c.items()}
    h = _rows(heads, seed=seed)
    steps = c["step"]
    context = settings["context"]
    periods = sorted(int(p) for p in np.unique(h["period"]))
    uniform = {p: uniform_prefix_matching(context, p) for p in periods}
    best = best_head(h, uniform)
    hc = head_curves(h, best, steps, periods)
    last = _rows(h, step=int(steps[-1]))
    others = [(best[0], k) for k in range(settings["n_head"]) if k != best[1]]
    control = min(others, key=lambda k: worst_margin(last, k, uniform)) if others else None
    previous = None
    if settings["n_layer"] > 1:
        heads0 = sorted({int(k) for k in h["head"][h["layer"] == 0]})
        final_prev = {k: head_curves(h, (0, k), steps, periods)["previous_token"][-1] for k in heads0}
        prev = max(heads0, key=lambda k: final_prev[k])
        previous = {"head": (0, prev), "curves": head_curves(h, (0, prev), steps, periods)}
    pair = None
    if previous is not None and best[0] > 0:
        rows = _rows(composition, seed=seed, layer_a=0, head_a=previous["head"][1], layer_b=best[0], head_b=best[1])
        pair = {k: _by_step(rows, k, steps) for k in ("k_composition", "baseline_mean", "baseline_std")}
        all_pairs = _rows(composition, seed=seed)
        pair["all"] = all_pairs
    return {"settings": settings, "seed": seed, "curves": c, "periods": periods, "uniform": uniform, "best": best,
            "head": hc, "control": control, "control_ablation": head_curves(h, control, steps, periods)["ablation"]
            if control else None, "previous": previous, "pair": pair}


def _other_pairs_rise(pair: dict, best: tuple[int, int], prev: tuple[int, int], i0: int, i1: int,
                      steps: np.ndarray) -> float | None:
    """The median K-composition rise across the window of every other (layer 0, later layer) pair: how much
    any pair's score moves (descriptive)."""
    rows = pair["all"]
    rises = []
    for key in sorted({(int(a), int(b), int(c), int(d)) for a, b, c, d in
                       zip(rows["layer_a"], rows["head_a"], rows["layer_b"], rows["head_b"])}):
        if key == (*prev, *best):
            continue
        mine = _rows(rows, layer_a=key[0], head_a=key[1], layer_b=key[2], head_b=key[3])
        v = _by_step(mine, "k_composition", steps)
        rises.append(float(v[i1] - v[i0]))
    return float(np.median(rises)) if rises else None


def _icl_change(values: np.ndarray, se: np.ndarray, i0: int, i1: int, z: float) -> dict:
    change, change_se = float(values[i1] - values[i0]), float(np.hypot(se[i0], se[i1]))
    moves = "falls" if change < -z * change_se else "rises" if change > z * change_se else "no change"
    return {"start": float(values[i0]), "end": float(values[i1]), "change": change, "change_se": change_se,
            "z": change / max(change_se, 1e-12), "moves": moves}


def seed_verdict(e: dict, ds: DetectSettings, rule: Sequence[str], full: bool = True) -> dict:
    """One seed's entry: window, every test (``in_rule`` marks those the verdict uses), the verdict, and with
    ``full`` the descriptive numbers (best head, previous-token head, natural-text ICL, stretches, phases)."""
    c, hc = e["curves"], e["head"]
    steps = c["step"]
    result = detect({"step": steps, "tokens": c["tokens"], "prefix_matching": hc["prefix_matching"],
                     "prefix_matching_se": hc["prefix_matching_se"], "copying": hc["copying"],
                     "copy_loss_drop": c["copy_loss_drop"], "copy_loss_drop_se": c["copy_loss_drop_se"],
                     "mixture_icl": c["mixture_icl"], "mixture_icl_se": c["mixture_icl_se"],
                     "mixture_loss": c["mixture_loss"]}, e["uniform"], ds)
    w = result["window"]
    tests = dict(result["tests"])
    tests["ablation"] = ablation_test(hc["ablation"], e["control_ablation"], ds.z)
    if e["previous"] is not None:
        pc = e["previous"]["curves"]
        tests["previous_token_head"] = previous_token_test(steps, pc["previous_token"], pc["previous_token_se"],
                                                           uniform_previous_token(e["settings"]["context"]), w, ds)
    else:
        tests["previous_token_head"] = {"pass": False, "reason": "a 1-layer model has no earlier layer"}
    pair = e["pair"]
    tests["k_composition"], tests["k_composition_above_random"] = composition_tests(
        *(None,) * 3 if pair is None else (pair["k_composition"], pair["baseline_mean"], pair["baseline_std"]), w, ds.z)
    for name, t in tests.items():
        t["in_rule"] = name in rule
    out = {"phase_change_detected": verdict(tests, rule), "window": w, "tests": tests}
    if not full:
        return out
    i0, i1 = w["start_index"], w["end_index"]
    if pair is not None:
        tests["k_composition"]["other_pairs_rise_median"] = _other_pairs_rise(pair, e["best"], e["previous"]["head"],
                                                                              i0, i1, steps)
    periods, uniform = e["periods"], e["uniform"]
    settings = e["settings"]
    phases = ie_kl_phases(steps, c["energy"], c["kl_unigram"], ds.smooth_decades, ds.min_swing)
    out.update({
        "loss_bump": result["loss_bump"],
        "nonconvex": nonconvex_stretches(steps, c["mixture_loss"], ds.smooth_decades, ds.z),
        "best_head": {"layer": e["best"][0], "head": e["best"][1], "probe_periods": periods,
                      "final_prefix_matching": {str(p): float(hc["prefix_matching"][p][-1]) for p in periods},
                      "final_prefix_matching_se": {str(p): float(hc["prefix_matching_se"][p][-1]) for p in periods},
                      "uniform_prefix_matching": {str(p): uniform[p] for p in periods},
                      "final_prefix_matching_mean": float(hc["prefix_matching_mean"][-1]),
                      "uniform_prefix_matching_mean": float(np.mean(list(uniform.values()))),
                      "final_copying": float(hc["copying"][-1]),
                      "control_head": e["control"][1] if e["control"] else None},
        "previous_token_head": None if e["previous"] is None else {
            "layer": 0, "head": e["previous"]["head"][1],
            "final": float(e["previous"]["curves"]["previous_token"][-1]),
            "uniform": uniform_previous_token(settings["context"])},
        "final_icl": {"natural_text_band": float(c["final_icl"][-1]), "natural_text_band_se": float(c["final_icl_se"][-1]),
                      "natural_text_single_position": float(c["final_icl_single"][-1]),
                      "natural_text_single_position_se": float(c["final_icl_single_se"][-1]),
                      "training_distribution_band": float(c["mixture_icl"][-1]),
                      "training_distribution_band_se": float(c["mixture_icl_se"][-1])},
        "natural_icl_across_window": {
            "band": _icl_change(c["icl"], c["icl_se"], i0, i1, ds.z),
            "single_position": _icl_change(c["icl_single"], c["icl_single_se"], i0, i1, ds.z)},
        "final_losses": {"natural_text": float(c["val_loss"][-1]), "training_distribution": float(c["mixture_loss"][-1])},
        "seed_000_phases": {k: phases[k] for k in ("phase_1", "phase_2", "phase_3", "unigram_step", "ie_minimum_step")},
        "cpu_seconds": float(c["cpu_seconds"][-1]),
    })
    return out


# --- one run (a setting over its seeds) and all of them --------------------------------------------------


def _setting(settings: Mapping) -> dict:
    mixture = MixtureSettings(**settings["mixture"])
    return {"layers": settings["n_layer"], "width": settings["d_model"], "heads": settings["n_head"],
            "context": settings["context"], "batch_size": settings["batch_size"], "steps": settings["steps"],
            "lr": settings["lr"], "schedule": settings["schedule"], "data": mixture.label, "mixture": asdict(mixture),
            "seeds": list(settings["seeds"])}


def run_entry(settings: Mapping, seeds: Mapping[int, dict]) -> dict:
    """A run over its seeds: each seed's entry, how many detect, the peak in tokens over the detecting seeds
    and the best head's final score (mean over the periods) over all seeds, as mean and standard error."""
    detected = [s for s, r in seeds.items() if r["phase_change_detected"]]
    return {
        "setting": _setting(settings),
        "detected_seeds": len(detected), "seeds_run": len(seeds),
        "peak_tokens": mean_se([seeds[s]["window"]["peak_tokens"] for s in detected]),
        "window_peak_tokens_every_seed": mean_se([r["window"]["peak_tokens"] for r in seeds.values()]),
        "final_prefix_matching": mean_se([r["best_head"]["final_prefix_matching_mean"] for r in seeds.values()]),
        "uniform_prefix_matching": next(iter(seeds.values()))["best_head"]["uniform_prefix_matching_mean"],
        "natural_icl_band_change": mean_se([r["natural_icl_across_window"]["band"]["change"] for r in seeds.values()]),
        "natural_icl_falls_in": sum(r["natural_icl_across_window"]["band"]["moves"] == "falls" for r in seeds.values()),
        "nonconvex_stretches": [r["nonconvex"]["count"] for r in seeds.values()],
        "one_stretch_inside_window": sum(_one_stretch_inside(r) for r in seeds.values()),
        "seeds": {str(s): r for s, r in seeds.items()},
    }


def _one_stretch_inside(r: dict) -> bool:
    """The loss is non-convex beyond its noise in exactly one stretch, and it overlaps the window."""
    (stretch, *rest) = r["nonconvex"]["stretches"] or [None]
    w = r["window"]
    return bool(stretch and not rest and stretch["start"] <= w["end"] and stretch["end"] >= w["start"])


def _differs_only_in(settings: Mapping, reference: Mapping) -> set[str]:
    """The setting keys (mixture keys as ``mixture.<key>``) in which a run differs from the reference."""
    flat = lambda s: {**{k: v for k, v in s.items() if k not in ("mixture", "seeds")},  # noqa: E731
                      **{f"mixture.{k}": v for k, v in s["mixture"].items()}}
    a, b = flat(settings), flat(reference)
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def axis(runs: Mapping[str, dict], settings: Mapping[str, Mapping], reference: str, key: str) -> list[dict]:
    """The runs that differ from the reference only in ``key`` (and the reference), ordered by it: the best
    head's final score and the peak in tokens of each, as mean and standard error over its seeds."""
    names = [n for n in runs if n == reference or _differs_only_in(settings[n], settings[reference]) == {key}]
    value = (lambda n: settings[n]["mixture"][key.split(".", 1)[1]]) if key.startswith("mixture.") else \
        (lambda n: settings[n][key])
    return [{"run": n, "value": value(n), "detected_seeds": runs[n]["detected_seeds"], "seeds_run": runs[n]["seeds_run"],
             "final_prefix_matching": runs[n]["final_prefix_matching"], "peak_tokens": runs[n]["peak_tokens"],
             "natural_icl_band_change": runs[n]["natural_icl_band_change"],
             "natural_icl_falls_in": runs[n]["natural_icl_falls_in"]} for n in sorted(names, key=value)]


def rule_report(runs: Mapping[str, dict], reference: str, rule: Sequence[str]) -> dict:
    """Per test, the seeds of the controls (every run but the reference) in which it fails: a test that fails
    in none cannot tell a phase change from its absence; and the reference's seeds in which it fails. ``rule_tests_never_failing``: the rule's tests that
    pass in every control (should be empty)."""
    fails = {t: [] for t in TESTS}
    in_reference = {t: [] for t in TESTS}
    for name, run in runs.items():
        for seed, r in run["seeds"].items():
            for t in TESTS:
                if not r["tests"][t]["pass"]:
                    (in_reference if name == reference else fails)[t].append(f"{name}/{seed}")
    return {"rule": list(rule), "descriptive": [t for t in TESTS if t not in rule], "fails_in_controls": fails,
            "fails_in_reference": in_reference,
            "rule_tests_never_failing": [t for t in rule if not fails[t]],
            "descriptive_tests_failing": [t for t in TESTS if t not in rule and fails[t]]}


def sensitivity(evidence: Mapping[str, Mapping[int, dict]], ds: DetectSettings, vs: VerdictSettings) -> list[dict]:
    """The verdicts of every run over the grid of ``min_rise`` and ``z``: detecting seeds of each."""
    rows = []
    for min_rise in vs.sensitivity["min_rise"]:
        for z in vs.sensitivity["z"]:
            settings = ds.but(min_rise=float(min_rise), z=float(z))
            detected = {name: sum(seed_verdict(e, settings, vs.rule, full=False)["phase_change_detected"]
                                  for e in seeds.values()) for name, seeds in evidence.items()}
            rows.append({"min_rise": float(min_rise), "z": float(z), "detected_seeds": detected})
    return rows


def summarize(tables: Mapping[str, tuple[Mapping, dict, dict, dict]], reference: str, ds: DetectSettings,
              vs: VerdictSettings) -> dict:
    """metrics/phase_change.json from every run's (settings, curves, heads, composition)."""
    evidence = {name: {seed: seed_evidence(settings, curves, heads, composition, seed) for seed in seeds_of(curves)}
                for name, (settings, curves, heads, composition) in tables.items()}
    runs = {name: run_entry(tables[name][0], {seed: seed_verdict(e, ds, vs.rule) for seed, e in seeds.items()})
            for name, seeds in evidence.items()}
    settings = {name: t[0] for name, t in tables.items()}
    ref = runs[reference]
    controls = {}
    for name, r in runs.items():
        ratio = (r["peak_tokens"]["mean"] / ref["peak_tokens"]["mean"]
                 if r["peak_tokens"]["mean"] is not None and ref["peak_tokens"]["mean"] else None)
        controls[name] = {"detected_seeds": r["detected_seeds"], "seeds_run": r["seeds_run"],
                          "peak_tokens": r["peak_tokens"], "peak_tokens_over_reference": ratio}
    random_runs = [n for n in runs if _differs_only_in(settings[n], settings[reference]) == {"mixture.source"}]
    dose = axis(runs, settings, reference, "mixture.repeat_fraction")
    return _finite({
        "runs": runs,
        "reference": reference,
        "detected": {n: f"{r['detected_seeds']} of {r['seeds_run']}" for n, r in runs.items()},
        "controls": {"reference": reference, "runs": controls},
        "verdict_rule": rule_report(runs, reference, vs.rule),
        "sensitivity": sensitivity(evidence, ds, vs),
        "dose": dose,
        "width": axis(runs, settings, reference, "d_model"),
        "icl_search": {"runs": [d["run"] for d in dose],
                       "head_forms_and_natural_icl_falls": [d["run"] for d in dose if d["detected_seeds"] > 0
                                                            and d["natural_icl_falls_in"] > 0]},
        "second_dataset": {"runs": {n: {"data": runs[n]["setting"]["data"], "detected_seeds": runs[n]["detected_seeds"],
                                        "seeds_run": runs[n]["seeds_run"], "peak_tokens": runs[n]["peak_tokens"],
                                        "window_peak_tokens_every_seed": runs[n]["window_peak_tokens_every_seed"],
                                        "failing_rule_tests": sorted({t for e in runs[n]["seeds"].values()
                                                                      for t in vs.rule if not e["tests"][t]["pass"]})}
                                    for n in random_runs},
                           "reference_peak_tokens": ref["peak_tokens"],
                           "reference_window_peak_tokens_every_seed": ref["window_peak_tokens_every_seed"]},
        "detect": asdict(ds),
        "cpu_seconds_all_runs": float(sum(s["cpu_seconds"] for r in runs.values() for s in r["seeds"].values())),
        "seed_000_phase_3_in": sorted(f"{n}/{s}" for n, r in runs.items() for s, e in r["seeds"].items()
                                      if e["seed_000_phases"]["phase_3"]),
    })


def load_runs(names, curves_paths, heads_paths, composition_paths, summary: dict) -> tuple[dict, dict]:
    """The named runs' curves and their best heads' curves (the heads the summary chose), by run and seed:
    ``curves[run][seed]``, ``heads[run][seed]`` (prefix matching per period and its mean, copying, the
    previous-token head's score, and their K-composition with its baseline)."""
    curves, heads = {}, {}
    for name, curves_path, heads_path, composition_path in zip(names, curves_paths, heads_paths, composition_paths,
                                                                strict=True):
        if name not in summary["runs"]:
            raise ValueError(f"run {name!r} is not in metrics/phase_change.json (runs: {sorted(summary['runs'])}); "
                             "rerun phase_change_summary")
        run = summary["runs"][name]
        table = read_columns(curves_path, curves_schema(run["setting"]["context"]))
        head_table = read_columns(heads_path, HEADS_SCHEMA)
        pairs = read_columns(composition_path, COMPOSITION_SCHEMA)
        curves[name], heads[name] = {}, {}
        for seed, entry in run["seeds"].items():
            c = _rows(table, seed=int(seed))
            c = {k: v[np.argsort(c["step"])] for k, v in c.items()}
            curves[name][seed] = c
            h = _rows(head_table, seed=int(seed))
            b = entry["best_head"]
            hc = head_curves(h, (b["layer"], b["head"]), c["step"], b["probe_periods"])
            if entry["previous_token_head"] is not None:
                prev = head_curves(h, (0, entry["previous_token_head"]["head"]), c["step"], b["probe_periods"])
                hc["previous_token_head"] = prev["previous_token"]
                if b["layer"] > 0:
                    rows = _rows(pairs, seed=int(seed), layer_a=0, head_a=entry["previous_token_head"]["head"],
                                 layer_b=b["layer"], head_b=b["head"])
                    hc["k_composition"] = {"score": _by_step(rows, "k_composition", c["step"]),
                                           **{k: _by_step(rows, k, c["step"]) for k in ("baseline_mean", "baseline_std")}}
            heads[name][seed] = hc
    return curves, heads


# --- the findings' sentences (tinylens.findings) -------------------------------------------------------

#: How a control run differs from the reference, in words (the setting keys a run may override).
_DIFFERENCES = {"layers": "{} layers", "width": "width {}", "schedule": "{} learning rate", "context": "context {}",
                "lr": "lr {}", "steps": "{} steps", "heads": "{} heads", "data": "{}"}


def _difference(run: dict, reference: dict) -> str:
    """What sets a run apart from the reference run: its differing settings."""
    changed = [fmt.format(run["setting"][k]).replace("1 layers", "1 layer") for k, fmt in _DIFFERENCES.items()
               if run["setting"][k] != reference["setting"][k]]
    return ", ".join(changed) or "the reference's setting"


def _tokens(stat: dict) -> str:
    if stat["mean"] is None:
        return "none"
    se = f" +- {num(round(stat['se']))}" if stat["se"] is not None else ""
    return f"{num(round(stat['mean']))}{se} tokens (n = {stat['n']})"


def _test_words(rule: Sequence[str]) -> str:
    return ", ".join(t.replace("_", " ") for t in rule)


def findings(documents: dict) -> list[str]:
    """The experiment's sentences of the run's findings (tinylens.findings). Layers and heads count from 1 in
    the sentences (the metrics from 0). ``documents``: ``phase_change`` (metrics/phase_change.json)."""
    doc = documents["phase_change"]
    runs, name = get(doc, "runs"), get(doc, "reference")
    ref = get(runs, name)
    setting = ref["setting"]
    rule = get(doc, "verdict_rule")
    out = [f"On the experiment's data ({setting['data']}: a labelled second dataset), the rule ("
           f"{_test_words(rule['rule'])}; each a one-sided test at z = {num(get(doc, 'detect', 'z'))}) detects a phase "
           f"change in " + "; ".join(f"{n}: {get(doc, 'detected', n)} seeds" for n in runs) + "."]
    never = rule["rule_tests_never_failing"]
    fails, in_ref = rule["fails_in_controls"], rule["fails_in_reference"]
    passing = [t for t in rule["descriptive"] if not fails[t] and not in_ref[t]]
    failing = [f"{t.replace('_', ' ')} (fails in {len(fails[t])} control seeds)" for t in rule["descriptive"]
               if fails[t] and not in_ref[t]]
    reference_fails = [f"{t.replace('_', ' ')} (fails in {len(in_ref[t])} of {ref['seeds_run']} reference seeds)"
                       for t in rule["descriptive"] if in_ref[t]]
    described = ([f"{_test_words(passing)} (pass in every control seed)"] if passing else []) + failing + reference_fails
    out.append(("Every test of the rule fails in at least one control seed" if not never else
                f"Of the rule's tests, {_test_words(never)} pass in every control seed (they cannot discriminate)")
               + (f". Descriptive: {'; '.join(described)}." if described else "."))
    seed0, entry = next(iter(ref["seeds"].items()))
    head, w = entry["best_head"], entry["window"]
    scores = ", ".join(f"{num(head['final_prefix_matching'][str(p)])} at period {p} (uniform "
                       f"{num(head['uniform_prefix_matching'][str(p)])})" for p in head["probe_periods"])
    where = f"the {setting['layers']}-layer, width-{setting['width']} reference run ({name})"
    out.append(f"In {where} the window's peak lies at {_tokens(ref['peak_tokens'])} over its detecting seeds (a peak "
               f"is a checkpoint, located to within {num(100 * w['located_within'], 2)}%); in seed "
               f"{seed0} the window spans steps {num(w['start'])} to {num(w['end'])} and the best head (layer "
               f"{head['layer'] + 1}, head {head['head'] + 1}) ends at {scores}.")
    t = entry["tests"]
    ab, prev, kc = t["ablation"], t["previous_token_head"], t["k_composition"]
    mech = [f"zeroing that head raises the second copy's loss by {num(ab['best_raise'])} nats (z = {num(ab['best_z'], 2)})"
            + (f", zeroing head {head['control_head'] + 1} of its layer (its least induction-like) by "
               f"{num(ab['control_raise'])} (z = {num(ab['control_z'], 2)}; the difference's z = "
               f"{num(ab['difference_z'], 2)})" if ab.get("control_z") is not None else "")]
    if "window" in prev:
        p = entry["previous_token_head"]
        mech.append(f"a previous-token head (layer 1, head {p['head'] + 1}) rises fastest at step "
                    f"{num(prev['window']['peak'])} (window {num(prev['window']['start'])} to "
                    f"{num(prev['window']['end'])}) and ends at {num(p['final'])} (uniform {num(p['uniform'])})")
    if "rise" in kc:
        level = t["k_composition_above_random"]
        mech.append(f"their K-composition goes from {num(kc['start'])} to {num(kc['end'])} across the window (a rise "
                    f"of z = {num(kc['z'], 2)} random-head standard deviations; other pairs' median rise "
                    f"{num(kc.get('other_pairs_rise_median'), 2)}) and ends {num(level['z'], 2)} of them above random "
                    f"heads' {num(kc['baseline_mean'])} +- {num(kc['baseline_std'], 2)}")
    out.append(f"In seed {seed0}: " + "; ".join(mech) + ".")
    controls = []
    for other, run in runs.items():
        if other == name:
            continue
        controls.append(f"{_difference(run, ref)} ({other}): {run['detected_seeds']} of {run['seeds_run']} seeds, best "
                        f"head {num(run['final_prefix_matching']['mean'])} (uniform {num(run['uniform_prefix_matching'])})"
                        + (f", peak at {_tokens(run['peak_tokens'])}" if run["peak_tokens"]["mean"] is not None else ""))
    if controls:
        out.append("The controls: " + "; ".join(controls) + ".")
    for key, what in (("dose", "the repeated fraction"), ("width", "the width")):
        points = get(doc, key)
        if len(points) > 1:
            out.append(f"Against {what}: " + "; ".join(
                f"{num(d['value'])}: best head {num(d['final_prefix_matching']['mean'])}"
                f" +- {num(d['final_prefix_matching']['se'], 2)}, peak {_tokens(d['peak_tokens'])}" for d in points) + ".")
    band, single = entry["natural_icl_across_window"]["band"], entry["natural_icl_across_window"]["single_position"]
    found = get(doc, "icl_search", "head_forms_and_natural_icl_falls")
    fractions = ", ".join(num(d["value"]) for d in get(doc, "dose"))
    moves = {"falls": "falls", "rises": "rises", "no change": "does not move"}
    dose = get(doc, "dose")
    out.append(f"On natural text the ICL score (early band before any training repeat can be copied) {moves[band['moves']]} "
               f"across seed {seed0}'s window ({num(band['start'])} to {num(band['end'])} nats, change {num(band['change'])} "
               f"+- {num(band['change_se'], 2)}); Olsson et al.'s single-position form {moves[single['moves']]} "
               f"({num(single['change'])} +- {num(single['change_se'], 2)}). Its change across the window against the "
               "repeated fraction (mean over seeds): " + "; ".join(
                   f"{num(d['value'])}: {num(d['natural_icl_band_change']['mean'])} +- "
                   f"{num(d['natural_icl_band_change']['se'], 2)} (falls in {d['natural_icl_falls_in']} of "
                   f"{d['seeds_run']} seeds, the head detected in {d['detected_seeds']})" for d in dose) + ". "
               + (f"The head forms and natural-text ICL falls in {', '.join(found)}." if found else
                  f"In none of the repeated fractions run ({fractions}) does the head form while natural-text ICL "
                  "falls (method.md §8b lists the longer runs searched outside the default run)."))
    second = get(doc, "second_dataset", "runs")
    for other, s in second.items():
        failing = s["failing_rule_tests"]
        out.append(f"On {s['data']} ({other}: no natural text) a phase change is detected in {s['detected_seeds']} of "
                   f"{s['seeds_run']} seeds" + (f" (failing in some seed: {_test_words(failing)})" if failing else "")
                   + f"; its window's peak lies at {_tokens(s['window_peak_tokens_every_seed'])} over every seed, the "
                   f"reference's at {_tokens(get(doc, 'second_dataset', 'reference_window_peak_tokens_every_seed'))}.")
    counts = "; ".join(f"{n}: {', '.join(map(str, r['nonconvex_stretches']))}" for n, r in runs.items())
    out.append(f"Stretches where the smoothed loss is not convex beyond its noise (z > {num(get(doc, 'detect', 'z'))}), per "
               f"seed: {counts}; exactly one, inside the window, in "
               + ", ".join(f"{r['one_stretch_inside_window']} of {r['seeds_run']} seeds of {n}" for n, r in runs.items())
               + ".")
    grid = get(doc, "sensitivity")
    ref_counts = sorted({row["detected_seeds"][name] for row in grid})
    others = {n: sorted({row["detected_seeds"][n] for row in grid}) for n in runs if n != name}
    out.append(f"Over min_rise {', '.join(num(v) for v in sorted({r['min_rise'] for r in grid}))} and z "
               f"{', '.join(num(v) for v in sorted({r['z'] for r in grid}))}, the reference is detected in "
               f"{' to '.join(map(str, (ref_counts[0], ref_counts[-1])) if len(ref_counts) > 1 else map(str, ref_counts))} "
               f"of {ref['seeds_run']} seeds; " + "; ".join(
                   f"{n} in {v[0]}" + (f" to {v[-1]}" if len(v) > 1 else "") for n, v in others.items()) + ".")
    phase_3 = get(doc, "seed_000_phase_3_in")
    out.append("Seed 000's phase 3 (the interaction energy rising again while the KL stays high) appears in "
               + (", ".join(phase_3) if phase_3 else "none of the runs' seeds") + ".")
    return out
