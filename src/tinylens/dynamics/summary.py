"""Per seed: the curves read back from the tables, and the phases found in them (metrics/dynamics.json)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tinylens.dynamics.heads import prefix_matching_score
from tinylens.dynamics.phases import critical_points, loss_bump, phase_change_window, source000_phases
from tinylens.dynamics.schemas import HEAD_SCORES, HEADS_SCHEMA, checkpoint_schema, depth_names
from tinylens.measures import share_test
from tinylens.tables import fixed_list_to_numpy, read_table
from tinylens.wording import block, direction, get, grouped, listing, num, span, stated

#: The depth whose interaction energy is the headline curve: the token states after ``ln_f``, the
#: last hidden state a model hands its unembedding (what "token states" means for the checkpointed
#: model suites source 000 measures).
HEADLINE_DEPTH = "ln_f"

#: Numbers the sources report, beside ours in the metrics JSON. Olsson et al. 2022 is not quoted in
#: method.md: its values are approximate, as read from the paper's text and figures.
SOURCE = {
    "olsson_2022": {
        "phase_change_tokens": [2.5e9, 5e9],
        "icl_score_after_phase_change_nats": -0.4,
        "icl_positions": [50, 500],
        "context": 512,
        "note": "small attention-only and MLP models; approximate values from the paper's text and figures "
                "(not quoted in method.md). The loss curve shows a bump in the same window.",
    },
    "source_000": {
        "phases": ["1: KL(model||unigram) low, IE high (unigram learned)",
                   "2: KL up, IE down", "3: IE up again, KL high"],
        "monotone": "the interaction energy rises along the forward pass (source 001's dynamical-systems reading; "
                    "arXiv 2312.10794)",
        "note": "qualitative: no published numbers",
    },
}


@dataclass(frozen=True)
class PhaseSettings:
    """How the summary finds windows and phases in the curves (config key ``dynamics.phases``); the
    measurement does not read them, so changing one reruns the summary only.

    smooth_decades: Gaussian smoothing width in log10(step); min_swing: a critical point needs a rise
    and a fall of this fraction of the curve's range; phase_z: each change of source 000's phases must
    exceed this many times its curve's noise (:func:`tinylens.dynamics.phases.source000_phases`);
    induction_threshold: a best head whose final prefix-matching score exceeds it is an induction head;
    unigram_threshold (nats): the first checkpoint whose unigram-direction KL is below it owns the direction.
    """

    smooth_decades: float
    min_swing: float
    phase_z: float
    induction_threshold: float
    unigram_threshold: float


@dataclass(frozen=True)
class Curves:
    """One seed's tables as arrays, checkpoints in step order.

    metrics: column -> ``[checkpoint]`` (``ie``/``ie_prefix``: ``[checkpoint depth]``,
    ``loss_by_position``: ``[checkpoint context]``); heads: score -> ``[checkpoint layer head]``.
    """

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    heads: dict[str, np.ndarray]

    def at(self, steps: np.ndarray) -> Curves:
        """The same curves at ``steps`` only (every one of them a checkpoint of this seed)."""
        index = np.searchsorted(self.steps, steps)
        if not np.array_equal(self.steps[np.minimum(index, len(self.steps) - 1)], steps):
            raise ValueError(f"steps {sorted(set(steps.tolist()) - set(self.steps.tolist()))} are not checkpoints "
                             "of this seed")
        return Curves(self.steps[index], {k: v[index] for k, v in self.metrics.items()},
                      {k: v[index] for k, v in self.heads.items()})


def load_curves(checkpoints_path: str | Path, heads_path: str | Path, n_layer: int, n_head: int,
                context: int) -> Curves:
    schema = checkpoint_schema(n_layer, context)
    table = read_table(checkpoints_path, schema).sort_by("step")
    metrics = {}
    for name, dtype in schema.columns.items():
        column = table.column(name)
        metrics[name] = fixed_list_to_numpy(column) if hasattr(dtype, "list_size") else column.to_numpy()
    steps = metrics["step"]
    heads_table = read_table(heads_path, HEADS_SCHEMA).sort_by([("step", "ascending"), ("layer", "ascending"),
                                                                ("head", "ascending")])
    n = len(steps)
    if heads_table.num_rows != n * n_layer * n_head or not np.array_equal(
            np.unique(heads_table.column("step").to_numpy()), steps):
        raise ValueError(f"{heads_path} does not hold {n_layer} x {n_head} heads for each of the {n} checkpoints "
                         f"of {checkpoints_path}; rerun the rule that writes them (snakemake --forcerun dynamics_measure)")
    heads = {name: heads_table.column(name).to_numpy().reshape(n, n_layer, n_head) for name in HEAD_SCORES}
    return Curves(steps=steps, metrics=metrics, heads=heads)


def curves_of_seeds(n_layer: int, n_head: int, context: int, seeds: Sequence[int], checkpoints: Sequence[str | Path],
                    heads: Sequence[str | Path]) -> dict[str, Curves]:
    """Every seed's curves (:func:`load_curves`), keyed by the seed as text, the tables in the order of ``seeds``."""
    return {str(seed): load_curves(c, h, n_layer, n_head, context)
            for seed, c, h in zip(seeds, checkpoints, heads, strict=True)}


def uniform_prefix_matching(repeat_length: int, copies: int) -> float:
    """The prefix-matching score of a head attending uniformly to every earlier position: the level a
    head without any induction reaches by chance (tokens distinct within a repeat)."""
    import torch
    pos = repeat_length * copies
    tokens = torch.arange(repeat_length).repeat(copies)[None]
    uniform = torch.tril(torch.ones(pos, pos)) / torch.arange(1, pos + 1)[:, None]
    return float(prefix_matching_score(uniform[None, None], tokens, repeat_length)[0])


def seed_summary(curves: Curves, n_layer: int, tokens_per_step: int, settings: PhaseSettings) -> dict:
    """The phase-change window, the best head, the IE/KL critical points and phases of one seed."""
    width, min_swing = settings.smooth_decades, settings.min_swing
    m, steps = curves.metrics, curves.steps
    prefix = curves.heads["prefix_matching"]
    layer, head = np.unravel_index(int(np.argmax(prefix[-1])), prefix.shape[1:])
    best_curve = prefix[:, layer, head]
    window = phase_change_window(steps, best_curve, m["icl_band"], width)
    depth = depth_names(n_layer).index(HEADLINE_DEPTH)
    ie = m["ie"][:, depth]
    phases = source000_phases(steps, ie, m["kl_model_unigram"], width, settings.phase_z)
    owned = [int(s) for s, kl in zip(steps, m["unigram_direction_kl"]) if kl < settings.unigram_threshold]
    final = -1
    icl_final, icl_se = float(m["icl_band"][final]), float(m["icl_band_se"][final])
    formed = bool(best_curve[final] > settings.induction_threshold)
    icl_significant = bool(icl_final + 2 * icl_se < 0)
    return {
        "final_step": int(steps[final]),
        "checkpoints": len(steps),
        "final": {
            "train_loss": float(m["train_loss"][final]), "val_loss": float(m["val_loss"][final]),
            "icl_band": icl_final, "icl_band_se": icl_se,
            "icl_score": float(m["icl_score"][final]), "icl_score_se": float(m["icl_score_se"][final]),
            "kl_model_unigram": float(m["kl_model_unigram"][final]),
            "kl_unigram_model": float(m["kl_unigram_model"][final]),
            "unigram_direction_kl": float(m["unigram_direction_kl"][final]),
            "ie_by_depth": dict(zip(depth_names(n_layer), map(float, m["ie"][final]))),
        },
        "best_head": {
            "block": int(layer), "head": int(head),  # 0-based, as in every metrics file and table
            **{name: float(curves.heads[name][final, layer, head]) for name in HEAD_SCORES},
            "prefix_matching_max": float(best_curve.max()),
            "prefix_matching_max_step": int(steps[int(np.argmax(best_curve))]),
        },
        "induction_head_formed": formed,
        "icl_significant": icl_significant,
        "phase_change_detected": formed and icl_significant,
        "window": {**window, "start_tokens": window["start"] * tokens_per_step,
                   "end_tokens": window["end"] * tokens_per_step},
        "loss_bump": loss_bump(steps, m["val_loss"], window["start"], window["end"], width),
        "ie_kl": {**phases, "ie_depth": HEADLINE_DEPTH},
        "ie_along_depth": ie_along_depth(m, n_layer),
        "kl_unigram_model_critical_points": critical_points(steps, m["kl_unigram_model"], width, min_swing),
        "unigram_direction_first_step": owned[0] if owned else None,
    }


def ie_along_depth(metrics: dict[str, np.ndarray], n_layer: int, checkpoint: int = -1) -> dict:
    """The interaction energy along the forward pass of one checkpoint (the last by default): per depth its mean
    over the energy windows with the standard error, and per step (through block 1, ..., block n, then ln_f)
    the sign test of the share of windows whose IE rises there (:func:`tinylens.measures.share_test`).
    Blocks 0-based in the keys, as in every metrics file."""
    names = depth_names(n_layer)
    windows = int(metrics["ie_windows"][checkpoint])
    rises = metrics["ie_rises"][checkpoint]
    return {"depths": names, "ie": [float(x) for x in metrics["ie"][checkpoint]],
            "ie_se": [float(x) for x in metrics["ie_se"][checkpoint]], "windows": windows,
            "steps": [{"from": names[d], "to": names[d + 1], **({"block": d} if d < n_layer else {}),
                       "rises": share_test(int(rises[d]), windows)} for d in range(len(names) - 1)]}


def summarize(per_seed: dict[int, dict], original_seed: int, settings: PhaseSettings, repeat_length: int,
              copies: int) -> dict:
    """All seeds side by side, the source numbers beside them. repeat_length, copies: the prefix-matching
    sequences the heads were scored on (for the uniform head's baseline)."""
    windows = [s["window"] for s in per_seed.values()]
    return {
        "original_seed": original_seed,
        "settings": asdict(settings),
        "headline": {
            "seeds_with_phase_change": sum(s["phase_change_detected"] for s in per_seed.values()),
            "seeds": len(per_seed),
            "window_peak_steps": {str(k): s["window"]["peak"] for k, s in per_seed.items()},
            "window_peak_step_median": float(np.median([w["peak"] for w in windows])),
            "best_heads": {str(k): f"block {s['best_head']['block']} head {s['best_head']['head']}: "
                                    f"prefix matching {s['best_head']['prefix_matching']:.3f}"
                           for k, s in per_seed.items()},
            "phases_present": {str(k): [i for i in (1, 2, 3) if s["ie_kl"][f"phase_{i}"]]
                               for k, s in per_seed.items()},
            "ie_rises_through_every_block": {str(k): all(t["rises"]["direction"] == "above"
                                                          for t in s["ie_along_depth"]["steps"] if "block" in t)
                                             for k, s in per_seed.items()},
            "prefix_matching_uniform_baseline": uniform_prefix_matching(repeat_length, copies),
        },
        "seeds": {str(k): v for k, v in per_seed.items()},
        "source": SOURCE,
    }


def drawn_window(seed: dict) -> dict | None:
    """The phase-change window the figures draw for one seed of ``metrics/dynamics.json``: an external model's
    induction-head onset (§8b, ``seeds.<N>.onset``: tinylens.phase_change.onset) where the summary has one, our
    seeds' §8 window otherwise; None where that verdict detected no phase change (nothing to draw)."""
    verdict = seed.get("onset", seed)
    return verdict["window"] if verdict["phase_change_detected"] else None


def phase_change_windows(summary: dict) -> dict[int, tuple[float, float]]:
    """Per seed in which a phase change was detected, the (start, end) steps of its window in a
    ``metrics/dynamics.json`` summary (:func:`summarize`; :func:`drawn_window`): what other families mark on
    their over-training figures. Seeds without a detected phase change are absent (no window to draw)."""
    try:
        windows = {int(seed): drawn_window(s) for seed, s in summary["seeds"].items()}
        return {seed: (float(w["start"]), float(w["end"])) for seed, w in windows.items() if w is not None}
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not a training-dynamics summary (metrics/dynamics.json): no seeds.<N>.window.start/end "
                         f"({error!r}); rerun the rule that writes it (snakemake --forcerun dynamics_summary)") from error


def findings(documents: dict) -> list[str]:
    """The family's sentences of the run's findings (tinylens.findings): whether an induction head and a phase
    change formed, the ICL score, the interaction energy along the forward pass (sign tests per step) and
    source 000's phases. Blocks and heads counted from 1. ``documents``: ``dynamics`` (metrics/dynamics.json).
    An external model's (its one seed, key ``external``): the same sentences speak of the one model instead of
    counting models."""
    doc = documents["dynamics"]
    seeds = get(doc, "seeds")
    n = len(seeds)
    one = n == 1 and "external" in doc
    models = f"{n} model{'s' if n != 1 else ''} (seed{'s' if n != 1 else ''} {listing(list(seeds))})"
    uniform = get(doc, "headline", "prefix_matching_uniform_baseline")
    best = {k: get(s, "best_head") for k, s in seeds.items()}
    scores = [get(b, "prefix_matching") for b in best.values()]
    formed = sum(bool(get(s, "induction_head_formed")) for s in seeds.values())
    top_seed = max(best, key=lambda k: best[k]["prefix_matching"])
    top = best[top_seed]
    head = f"block {block(get(top, 'block'))}, head {block(get(top, 'head'))}" + ("" if one else f" of seed {top_seed}")
    threshold = get(doc, "settings", "induction_threshold")
    if formed:
        out = [f"An induction head forms{'' if one else f' in {formed} of the {models}'} (final prefix-matching "
               f"score above {num(threshold)}; the best, {head}, reaches {num(top['prefix_matching'])} against a "
               f"uniform head's {num(uniform)})."]
    elif one:
        out = [f"No induction head forms: the best final prefix-matching score is {num(max(scores))} ({head}) "
               f"against a uniform head's {num(uniform)}."]
    else:
        out = [f"No induction head forms in any of the {models}: the best final prefix-matching score is "
               f"{num(max(scores))} ({head}; over the models {span(scores)}) against a uniform head's {num(uniform)}."]
    icl = [get(s, "final", "icl_band") for s in seeds.values()]
    se = [get(s, "final", "icl_band_se") for s in seeds.values()]
    significant = sum(bool(get(s, "icl_significant")) for s in seeds.values())
    out.append(f"The final in-context-learning score (mean loss over a band of late positions minus over a band "
               f"of early ones) is {span(icl)} nats "
               f"(standard error {'' if one else 'up to '}{num(max(se), 2)}): "
               + (("significantly below 0." if significant else "not two standard errors below 0.") if one else
                  f"significantly below 0 in {significant} of {n} models." if significant else
                  "in no model two standard errors below 0."))
    changes = get(doc, "headline", "seeds_with_phase_change")
    if one:
        out.append("A phase change (both together) is " + ("detected." if changes else "not detected."))
    else:
        out.append(f"A phase change (both together) is detected in {changes} of {n} models." if changes else
                   "No phase change is detected in any model.")
    if all("ie_along_depth" in s for s in seeds.values()):  # metrics of earlier runs have no per-window energy
        out.append(_monotone_sentence(doc))
    phases = get(doc, "headline", "phases_present")
    counts = {i: sum(i in p for p in phases.values()) for i in (1, 2, 3)}
    z = get(doc, "settings").get("phase_z")
    rule = (f" (each phase on its own conditions, interaction energy and KL at the same checkpoints, every change "
            f"above {num(z)} times its curve's noise)" if z is not None else "")
    out.append(f"Source 000's phases of the interaction energy after ln_f and KL(model || unigram) over training"
               f"{rule}: " + ", ".join(
                   (f"phase {i} ({PHASE_WORDS[i]}) {'present' if c else 'absent'}" if one else
                    f"phase {i} ({PHASE_WORDS[i]}) in {c} of {len(phases)} models") for i, c in counts.items()) + ".")
    return out


#: Source 000's phases in a few words each.
PHASE_WORDS = {1: "KL low and IE high: the unigram learned", 2: "KL up while IE falls", 3: "IE up again, KL high"}


def _monotone_sentence(doc: dict) -> str:
    """Source 000's and 001's monotone quantity: the original model's steps in words with their sign tests, then
    how many models rise through every block, and which steps agree across models."""
    seeds = get(doc, "seeds")
    original = str(get(doc, "original_seed"))
    where = "the model's last checkpoint" if "external" in doc else f"seed {original}'s final model"
    along = get(seeds, original, "ie_along_depth")
    through = [(block(get(t, "block")), get(t, "rises")) for t in get(along, "steps") if "block" in t]
    last = next(t for t in get(along, "steps") if "block" not in t)
    per_block: dict[int, list[str]] = {}
    for s in seeds.values():
        for t in get(s, "ie_along_depth", "steps"):
            if "block" in t:
                per_block.setdefault(block(t["block"]), []).append(direction(t["rises"]))
    everywhere = sum(bool(v) for v in get(doc, "headline", "ie_rises_through_every_block").values())
    rising = [b for b, d in per_block.items() if all(x == "above" for x in d)]
    falling = [b for b, d in per_block.items() if all(x == "below" for x in d)]
    agree = (f"; in every model it rises through block{'s' if len(rising) != 1 else ''} {listing(rising)}"
             if rising else "; through no block does it rise in every model")
    agree += (f" and falls through block{'s' if len(falling) != 1 else ''} {listing(falling)}" if falling else "")
    return (f"Source 000's and 001's monotone quantity, the interaction energy of the token states rising along the "
            f"forward pass (per step, the share of {get(along, 'windows')} validation windows whose energy rises, "
            f"sign test against one half): in {where} it "
            + grouped(through, "rises", "falls", what="share", preposition="through") + "; and it "
            + stated_step(last) + f"; it rises through every block in {everywhere} of {len(seeds)} models" + agree + ".")


def stated_step(step: dict) -> str:
    """One step's verdict with its sign test, naming where it goes (``rises through ln_f (share ...)``)."""
    return stated(get(step, "rises"), "rises", "falls", what="share").replace(" (", f" through {get(step, 'to')} (", 1)
