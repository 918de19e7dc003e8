"""The induction-head onset on any checkpoint suite: §8b's detection applied to checkpoints someone else
trained (method.md §8b, §13; an external model's ``metrics/dynamics.json``, ``seeds.0.onset``).

Our own §8b runs are measured inside their training job; an imported suite (Pythia's 154 checkpoints, or
any model TransformerLens loads) is measured checkpoint by checkpoint (:mod:`tinylens.external`). The
same statistics decide:

- **probes**: sequences of distinct random tokens repeated at each of ``probe_periods`` over the whole
  context (:func:`onset_probes`), drawn from the suite's own tokens with their own seed;
- **alias-free periods** (:func:`probe_period_problems`): a head that learnt to look a fixed distance
  ``d`` back scores as an induction head on probes whose period divides ``d + 1``. A period is rejected
  when any of its multiples up to the context falls in ``lookback_periods``, the range of ``d + 1`` the
  model may have learnt: a training mixture's repeat periods for our §8b runs; for a suite trained on
  natural text there is no such range from the data, only its short positional heads (previous-token
  heads and the next few distances back: ``[2, 4]``); and the periods' least common multiple must exceed
  the context, so that no single distance matches every period;
- **per-period prefix matching** (:func:`measure_onset`): each head's score kept per probe period with
  its standard error over the sequences; the best head (:func:`best_head`) is the one whose final score
  exceeds the uniform head's the most at its worst period, and it must pass the prefix-matching test at
  every probe period on its own (:func:`detect_onset`), not on the mean over periods;
- **the tests that can fail** (:func:`tinylens.phase_change.detect.detect`): the window where the best
  head's prefix matching rises and the ICL score on the training distribution (for an imported suite:
  natural text, §8's band score) falls fastest in log-step; at the first checkpoint at or after its end,
  one-sided z-tests of the prefix-matching rise, copying, the second copy's loss drop and the ICL
  score; the window not at the start and no wider than ``max_decades``; the loss bump against the noise.

The tables (``dynamics/seed0/onset.parquet`` per checkpoint: the weights' digest, the second copy's loss
drop; ``dynamics/seed0/onset_heads.parquet``: the §8b runs' heads schema) are torch-free to read; torch is
imported only by :func:`measure_onset`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tinylens.dynamics.probes import repeat_candidates
from tinylens.measures import standard_error
from tinylens.phase_change.data import tiled
from tinylens.phase_change.detect import DetectSettings, detect, uniform_prefix_matching
from tinylens.phase_change.schemas import HEADS_SCHEMA
from tinylens.tables import Schema
from tinylens.wording import block, get, num

if TYPE_CHECKING:
    from tinylens.dynamics.subjects import Subject
    from tinylens.dynamics.summary import Curves, PhaseSettings

#: One row per checkpoint: the weights' SHA-256 as loaded (tinylens.phase_change.integrity) and the second
#: copy's loss drop on the probes (mean and standard error over every probe sequence).
ONSET_SCHEMA = Schema("onset checkpoints", {
    "step": pa.int64(),
    "tokens": pa.int64(),
    "weights_sha256": pa.string(),
    "copy_loss_drop": pa.float64(),
    "copy_loss_drop_se": pa.float64(),
})
#: One row per checkpoint, head and probe period: the §8b runs' heads table's columns that a suite's onset
#: measures (one seed; no previous-token scores or ablations).
ONSET_HEADS_SCHEMA = Schema("onset heads", {k: HEADS_SCHEMA.columns[k] for k in (
    "step", "layer", "head", "period", "prefix_matching", "prefix_matching_se", "copying")})

#: Bytes of attention patterns and head writes held at once while measuring (a chunk of probe sequences).
CHUNK_BYTES = 1 << 28


@dataclass(frozen=True)
class OnsetSettings:
    """The probes of the onset (config ``external_models.<name>.onset``, without ``detect``):
    ``sequences`` random-token sequences per probe period, tokens not among the ``exclude`` most or least
    frequent, ``lookback_periods`` (lo, hi) or None, ``seed`` of the draw."""

    probe_periods: tuple[int, ...]
    sequences: int
    exclude: int
    lookback_periods: tuple[int, int] | None
    seed: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "probe_periods", tuple(int(p) for p in self.probe_periods))
        if self.lookback_periods is not None:
            object.__setattr__(self, "lookback_periods", tuple(int(p) for p in self.lookback_periods))


def lookback_aliases(period: int, context: int, lookback: Sequence[int] | None) -> list[int]:
    """The multiples of ``period`` up to ``context`` inside ``lookback`` (lo, hi; inclusive): the look-back
    periods a fixed-distance head could have learnt that would score on probes repeating at ``period``.

    >>> lookback_aliases(7, 64, (12, 24))  # 14 and 21 are training periods: a fixed look-back of 13 or 20 matches
    [14, 21]
    >>> lookback_aliases(29, 64, (12, 24))
    []
    """
    if lookback is None:
        return []
    lo, hi = lookback
    return [m for m in range(period, context + 1, period) if lo <= m <= hi]


def probe_period_problems(periods: Sequence[int], context: int, lookback: Sequence[int] | None, key: str) -> list[str]:
    """What is wrong with ``periods`` as probe periods at ``context`` tokens (empty: nothing): a period with a
    multiple among the ``lookback`` periods, a period that does not repeat twice in the context, or periods
    whose least common multiple a single fixed look-back could match. ``key``: the config key named."""
    problems = []
    for p in periods:
        aliased = lookback_aliases(p, context, lookback)
        if aliased:
            problems.append(
                f"config key '{key}.probe_periods': {p} is not alias-free: its multiple(s) {aliased} lie among "
                f"'{key}.lookback_periods' {list(lookback)}, so a head that looks a fixed distance back would "
                f"score like an induction head at it; probe at a period none of whose multiples up to the "
                f"context ({context}) lies in {lookback[0]}-{lookback[1]}")
        if 2 * p > context:
            problems.append(f"config key '{key}.probe_periods': {p} does not repeat twice in the context ({context}); "
                            f"use periods of at most {context // 2}")
    lcm = math.lcm(*periods) if periods else 0
    if len(periods) < 2 or lcm <= context:
        problems.append(
            f"config key '{key}.probe_periods' {list(periods)}: give at least two periods whose least common "
            f"multiple ({lcm}) exceeds the context ({context}), so that no single fixed look-back distance "
            "matches every period (e.g. [7, 11, 29] at a context of 512)")
    return problems


def check_probe_periods(periods: Sequence[int], context: int, lookback: Sequence[int] | None, key: str) -> None:
    """Raise ValueError listing :func:`probe_period_problems`, or return silently."""
    problems = probe_period_problems(periods, context, lookback, key)
    if problems:
        raise ValueError("; ".join(problems))


def onset_probes(train_ids: np.ndarray, vocab_size: int, context: int, settings: OnsetSettings,
                 key: str = "onset") -> dict[int, np.ndarray]:
    """Per probe period, ``sequences`` windows of ``context + 1`` tokens: distinct random tokens (not among the
    ``exclude`` most or least frequent of ``train_ids``) repeated at the period, ``[sequences context+1]``."""
    check_probe_periods(settings.probe_periods, context, settings.lookback_periods, key)
    candidates = repeat_candidates(np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size),
                                   settings.exclude)
    rng = np.random.default_rng(settings.seed)
    probes = {}
    for p in settings.probe_periods:
        if p > len(candidates):
            raise ValueError(f"config key '{key}.probe_periods': {p} distinct tokens needed, {len(candidates)} "
                             f"remain after excluding the {settings.exclude} most and least frequent "
                             f"('{key}.exclude'); lower one or the other")
        segments = [rng.choice(candidates, size=p, replace=False) for _ in range(settings.sequences)]
        probes[p] = np.stack([tiled(s, context + 1) for s in segments]).astype(np.int64)
    return probes


def measure_onset(subject: Subject, probes: Mapping[int, np.ndarray], device="cpu") -> tuple[dict, list[dict]]:
    """One checkpoint on the probes: (``copy_loss_drop`` and its ``_se`` over every sequence, the second copy's
    predictable targets' mean loss minus the first copy's; one row per head and probe period of
    :data:`ONSET_HEADS_SCHEMA` without ``step``: prefix matching with its standard error over the sequences,
    and the eigenvalue copying score)."""
    import torch
    import torch.nn.functional as F

    from tinylens.dynamics.heads import copying_score_eigen
    from tinylens.phase_change.run import per_sequence_prefix_matching

    device = torch.device(device)
    W_E, per_block, W_U = subject.copying_weights()
    copying = torch.stack([copying_score_eigen(W_E, W_V, W_O, W_U) for W_V, W_O in per_block]).cpu()
    d_model = W_E.shape[1]
    diffs, rows = [], []
    with torch.no_grad():
        for p, sequences in probes.items():
            pos = sequences.shape[1] - 1
            per_sequence = subject.n_layer * subject.n_head * pos * (pos + d_model) * 4
            chunk = max(1, CHUNK_BYTES // per_sequence)
            scores: list[list] = [[] for _ in range(subject.n_layer)]
            for i in range(0, len(sequences), chunk):
                tokens = torch.as_tensor(sequences[i : i + chunk], device=device)
                inputs, targets = tokens[:, :-1], tokens[:, 1:]
                patterns, _, _ = subject.heads(inputs)
                for b, pattern in enumerate(patterns):
                    scores[b].append(per_sequence_prefix_matching(pattern.double(), inputs, p).cpu())
                logits, _ = subject.forward(inputs)
                loss = F.cross_entropy(logits.transpose(1, 2).float(), targets, reduction="none").double()
                # position t predicts token t+1: the first copy's predictable targets are tokens 1..p-1, the
                # second copy's (predictable by induction) tokens p+1..2p-1
                diffs.append((loss[:, p : 2 * p - 1].mean(1) - loss[:, : p - 1].mean(1)).cpu().numpy())
            for b in range(subject.n_layer):
                s = torch.cat(scores[b])  # [sequences n_heads]
                for h in range(subject.n_head):
                    rows.append({"layer": b, "head": h, "period": int(p), "prefix_matching": float(s[:, h].mean()),
                                 "prefix_matching_se": standard_error(s[:, h]),
                                 "copying": float(copying[b, h])})
    d = np.concatenate(diffs)
    return {"copy_loss_drop": float(d.mean()), "copy_loss_drop_se": standard_error(d)}, rows


def _rows(heads: Mapping[str, np.ndarray], layer: int, head: int) -> np.ndarray:
    return (np.asarray(heads["layer"]) == layer) & (np.asarray(heads["head"]) == head)


def best_head(heads: Mapping[str, np.ndarray], uniform: Mapping[int, float]) -> tuple[int, int]:
    """The head whose prefix matching at the last checkpoint exceeds the uniform head's the most at its worst
    probe period (heads: columns of :data:`ONSET_HEADS_SCHEMA`)."""
    step, period, pm = (np.asarray(heads[k]) for k in ("step", "period", "prefix_matching"))
    last = step == step.max()
    keys = sorted({(int(a), int(b)) for a, b in zip(heads["layer"], heads["head"])})

    def worst(key: tuple[int, int]) -> float:
        mine = last & _rows(heads, *key)
        return min(float(pm[mine & (period == p)].mean()) - u for p, u in uniform.items())

    return max(keys, key=worst)


def head_curves(heads: Mapping[str, np.ndarray], head: tuple[int, int], steps: np.ndarray) -> dict:
    """One head's curves at ``steps``: per period ``prefix_matching`` and ``prefix_matching_se`` (period ->
    ``[checkpoint]``), and ``copying`` ``[checkpoint]``."""
    mine = _rows(heads, *head)
    step, period = np.asarray(heads["step"]), np.asarray(heads["period"])
    periods = sorted({int(p) for p in period})
    out: dict = {"prefix_matching": {}, "prefix_matching_se": {}}
    for p in periods:
        rows = mine & (period == p)
        order = {int(s): i for i, s in enumerate(step[rows])}
        missing = sorted(set(int(s) for s in steps) - set(order))
        if missing:
            raise ValueError(f"the onset heads table lacks steps {missing} for layer {head[0]}, head {head[1]}, "
                             f"period {p}; rerun the rule that writes it (snakemake --forcerun external_measure)")
        index = [order[int(s)] for s in steps]
        for name in ("prefix_matching", "prefix_matching_se"):
            out[name][p] = np.asarray(heads[name])[rows][index]
    first = mine & (period == periods[0])
    order = {int(s): i for i, s in enumerate(step[first])}
    out["copying"] = np.asarray(heads["copying"])[first][[order[int(s)] for s in steps]]
    return out


def detect_onset(curves: Mapping[str, np.ndarray], heads: Mapping[str, np.ndarray], context: int,
                 settings: DetectSettings) -> dict:
    """§8b's verdict on one suite, the best head required to pass at every probe period on its own.

    curves: ``step``, ``tokens`` (training tokens seen), ``icl`` and ``icl_se`` (the ICL score on the
    training distribution), ``loss`` (the held-out loss), ``copy_loss_drop`` and ``copy_loss_drop_se``,
    arrays over the checkpoints detection uses, in step order; heads: columns of :data:`ONSET_HEADS_SCHEMA`
    (rows of other steps are ignored); context: the probes' context (the uniform head's score per period).

    The window and the tests are :func:`tinylens.phase_change.detect.detect`'s, the §8b family's own: the
    window located on the best head's prefix matching averaged over the periods, the prefix matching tested at
    every probe period on its own (above the uniform head's by more than ``min_rise`` and by ``z`` standard
    errors), at least ``min_share`` of each period's rise inside the window, the window at most
    ``max_decades`` wide and after the first checkpoint; detected when every test passes."""
    steps = np.asarray(curves["step"], dtype=np.int64)
    keep = np.isin(np.asarray(heads["step"]), steps)
    heads = {k: np.asarray(v)[keep] for k, v in heads.items()}
    periods = sorted({int(p) for p in heads["period"]})
    uniform = {p: uniform_prefix_matching(context, p) for p in periods}
    head = best_head(heads, uniform)
    hc = head_curves(heads, head, steps)
    verdict = detect({"step": steps, "tokens": np.asarray(curves["tokens"], dtype=np.float64),
                      "prefix_matching": hc["prefix_matching"], "prefix_matching_se": hc["prefix_matching_se"],
                      "copying": hc["copying"], "copy_loss_drop": curves["copy_loss_drop"],
                      "copy_loss_drop_se": curves["copy_loss_drop_se"], "mixture_icl": curves["icl"],
                      "mixture_icl_se": curves["icl_se"], "mixture_loss": curves["loss"]}, uniform, settings)
    verdict["tested_at_step"] = verdict["window"]["tested_at_step"]
    verdict["best_head"] = {
        "layer": head[0], "head": head[1], "probe_periods": periods,
        "final_prefix_matching": {str(p): float(hc["prefix_matching"][p][-1]) for p in periods},
        "final_prefix_matching_se": {str(p): float(hc["prefix_matching_se"][p][-1]) for p in periods},
        "uniform_prefix_matching": {str(p): uniform[p] for p in periods},
        "final_copying": float(hc["copying"][-1]),
    }
    verdict["checkpoints"] = len(steps)
    return verdict


def suite_summary(curves: Curves, table: Mapping[str, np.ndarray], heads: Mapping[str, np.ndarray], n_layer: int,
                  tokens_per_step: int, phases: PhaseSettings, detect_settings: DetectSettings, keep: bool,
                  where: str) -> tuple[dict, str | None]:
    """One imported suite's seed entry of ``metrics/dynamics.json`` and the gate's warning (None: no checkpoint
    repeats weights): the integrity report from ``table``'s digests (:data:`ONSET_SCHEMA`'s columns); §8's
    phases, window and best head (:func:`tinylens.dynamics.summary.seed_summary`) and §8b's onset
    (:func:`detect_onset` on ``heads``) on the checkpoints the report keeps, as ``integrity`` and ``onset``
    beside §8's keys. ``curves``: the suite's §8 tables read back; ``where``: the suite, in the messages."""
    from tinylens.dynamics.summary import seed_summary
    from tinylens.phase_change.integrity import integrity_report, warning_text

    order = np.argsort(table["step"])
    table = {k: np.asarray(v)[order] for k, v in table.items()}
    report = integrity_report(table["step"], table["weights_sha256"], keep=keep)
    steps = np.asarray(report["detection_steps"], dtype=np.int64)
    if (steps > 0).sum() < 3:
        raise ValueError(f"{where}: {(steps > 0).sum()} checkpoints after step 0 remain once those repeating weights "
                         f"({report['left_out']}) are left out; phase and window detection needs 3. Add steps, or "
                         "set the entry's integrity.keep_duplicates: true to keep them")
    kept = curves.at(steps)
    at = np.searchsorted(table["step"], steps)
    onset = detect_onset(
        {"step": steps, "tokens": table["tokens"][at], "icl": kept.metrics["icl_band"],
         "icl_se": kept.metrics["icl_band_se"], "loss": kept.metrics["val_loss"],
         "copy_loss_drop": table["copy_loss_drop"][at], "copy_loss_drop_se": table["copy_loss_drop_se"][at]},
        heads, kept.metrics["loss_by_position"].shape[1], detect_settings)
    seed = {**seed_summary(kept, n_layer, tokens_per_step, phases), "integrity": report, "onset": onset}
    return seed, warning_text(report, where)


# --- the findings' sentences (tinylens.findings) --------------------------------------------------------

_TEST_WORDS = {
    "prefix_matching": "the best head's prefix matching does not clear a uniform head's at every probe period",
    "rise_in_window": "less of the best head's rise than required falls inside the window at some probe period",
    "window_width": "the window is wider than the decades allowed",
    "after_first_checkpoint": "the window starts at the first checkpoint",
    "copying": "the best head does not copy",
    "second_copy_loss_drop": "the second copy of a repeated random sequence is not predicted better than the first",
    "icl_training_distribution": "the in-context-learning score is not below zero",
}


def findings(documents: dict) -> list[str]:
    """The sentences of an imported suite's findings on its checkpoints and the induction-head onset
    (tinylens.findings): which checkpoints repeat weights and what was done with them, then §8b's verdict in
    the §8b family's words. Layers and heads counted from 1 (tinylens.wording.CONVENTION). ``documents``: ``dynamics`` (metrics/dynamics.json of
    an external model, whose one seed holds ``integrity`` and ``onset``)."""
    (seed,) = get(documents["dynamics"], "seeds").values()
    report, onset = get(seed, "integrity"), get(seed, "onset")
    n = report["checkpoints"]
    if report["flagged"]:
        out = [f"{len(report['flagged'])} of {n} checkpoints repeat weights (their content hashes as loaded): "
               + "; ".join(report["warnings"]) + ". " + (
                   "They are kept in phase and window detection (integrity.keep_duplicates)." if report["kept"] else
                   "They are left out of phase and window detection.")]
    else:
        out = [f"All {n} checkpoints hold distinct weights (content hashes as loaded)."]
    head, w = get(onset, "best_head"), get(onset, "window")
    periods = head["probe_periods"]
    scores = ", ".join(f"{num(head['final_prefix_matching'][str(p)])} +- "
                       f"{num(head['final_prefix_matching_se'][str(p)], 2)} at period {p} (a uniform head: "
                       f"{num(head['uniform_prefix_matching'][str(p)])})" for p in periods)
    where = f"the {get(onset, 'checkpoints')} checkpoints used"
    if get(onset, "phase_change_detected"):
        bump = get(onset, "loss_bump")
        out.append(f"On {where}, induction heads form between steps {num(w['start'])} and {num(w['end'])} "
                   f"({num(w['start_tokens'])} to {num(w['end_tokens'])} tokens; peak at step {num(w['peak'])}, "
                   f"{num(w['peak_tokens'])} tokens): the best head (layer {block(head['layer'])}, head {block(head['head'])}) "
                   f"ends at a prefix-matching score of {scores}, each period passing on its own, and a copying "
                   f"score of {num(head['final_copying'])}, and the loss curve "
                   + (f"bumps in the window (z = {num(bump['z'], 2)})." if bump["bump"] else
                      f"does not bump in the window (z = {num(bump['z'], 2)})."))
    else:
        tests = get(onset, "tests")
        failed = [_TEST_WORDS[k] for k, t in tests.items() if not t["pass"]]
        out.append(f"No induction-head onset is detected on {where} ({'; '.join(failed) or 'no test failed'}): "
                   f"the best head (layer {block(head['layer'])}, head {block(head['head'])}) ends at a prefix-matching score "
                   f"of {scores}.")
    return out
