"""This family's tables (results/<preset>/phase_change/<run>/): their Parquet schemas.

Free of torch, so the summary and figure jobs start quickly.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tinylens.tables import Schema

#: Every test a run's verdict can use (tinylens.phase_change.detect): the curves' and the mechanism's.
TESTS = ("prefix_matching", "rise_in_window", "window_width", "after_first_checkpoint", "copying",
         "second_copy_loss_drop", "icl_training_distribution", "ablation", "previous_token_head", "k_composition",
         "k_composition_above_random")

#: Float columns of the curves table measured at every checkpoint.
CURVE_COLUMNS = ("tokens", "lr", "train_loss", "val_loss", "icl", "icl_se", "icl_single", "icl_single_se",
                 "mixture_loss", "mixture_icl", "mixture_icl_se", "copy_loss_drop", "copy_loss_drop_se",
                 "energy", "kl_unigram", "cpu_seconds")
#: Loss per context position, natural text and the training mixture, ``[checkpoint context]``.
POSITION_COLUMNS = ("loss_by_position", "mixture_loss_by_position")
#: Measured at the last checkpoint only (NaN elsewhere): the ICL score on ``final_windows`` windows.
FINAL_COLUMNS = ("final_icl", "final_icl_se", "final_icl_single", "final_icl_single_se")


def curves_schema(context: int) -> Schema:
    """One row per seed and checkpoint."""
    return Schema("phase-change curves", {
        "seed": pa.int64(),
        "step": pa.int64(),
        **{name: pa.float64() for name in CURVE_COLUMNS},
        **{name: pa.float64() for name in FINAL_COLUMNS},
        "loss_by_position": pa.list_(pa.float64(), context),  # natural validation text
        "mixture_loss_by_position": pa.list_(pa.float64(), context),  # the training mixture's held-out windows
    })


#: One row per seed, checkpoint, head and probe period. Previous-token score: TransformerLens's "mul" form
#: on the probe sequences; ablation: the second copy's loss with the head zeroed minus without (NaN but at
#: the last checkpoint).
HEADS_SCHEMA = Schema("phase-change heads", {
    "seed": pa.int64(),
    "step": pa.int64(),
    "layer": pa.int32(),
    "head": pa.int32(),
    "period": pa.int32(),
    "prefix_matching": pa.float64(),
    "prefix_matching_se": pa.float64(),
    "previous_token": pa.float64(),
    "previous_token_se": pa.float64(),
    "copying": pa.float64(),
    "ablation_raise": pa.float64(),
    "ablation_raise_se": pa.float64(),
})

#: One row per seed, checkpoint and pair of heads (an earlier layer's head a, a later layer's head b): the
#: K-composition score (method.md §9, residual basis, LayerNorm folded) and the baseline of random heads.
COMPOSITION_SCHEMA = Schema("phase-change composition", {
    "seed": pa.int64(),
    "step": pa.int64(),
    "layer_a": pa.int32(),
    "head_a": pa.int32(),
    "layer_b": pa.int32(),
    "head_b": pa.int32(),
    "k_composition": pa.float64(),
    "baseline_mean": pa.float64(),
    "baseline_std": pa.float64(),
})


def rows_to_columns(rows: list[dict], names) -> dict[str, list]:
    """Rows (dicts) -> columns, a name missing from a row read as NaN (the tables hold no nulls)."""
    return {name: [r.get(name, float("nan")) for r in rows] for name in names}


def run_settings(base: Mapping, overrides: Mapping) -> dict:
    """One run's settings: ``phase_change.base`` with the run's keys over it (``mixture`` merged key by key),
    and its ``seeds``."""
    unknown = sorted(set(overrides) - set(base) - {"seeds"})
    if unknown:
        raise ValueError(f"phase_change.runs: unknown keys {unknown}; a run may set {sorted(base)} and seeds")
    merged = {**base, **overrides}
    merged["mixture"] = {**base["mixture"], **overrides.get("mixture", {})}
    return merged


def check_config(preset: Mapping, config: Mapping, where: str) -> list[str]:
    """What the schema cannot say of a preset's ``phase_change`` (``where``: the preset's key,
    ``presets.<name>``): the reference is a run; the verdict's rule names known tests; in every run the ICL
    bands and probe periods fit the context, the probe periods are alias-free (no multiple below the
    context is a multiple of a training period; their least common multiple beyond the context), and the
    natural-text ICL score's early band and early position come before any training repeat can be copied."""
    from tinylens.phase_change.data import MixtureSettings, probe_period_problems

    phase, key = preset["phase_change"], where
    problems = []
    if phase["reference"] not in phase["runs"]:
        problems.append(f"config key '{key}.phase_change.reference' ({phase['reference']!r}) must name one of "
                        f"'{key}.phase_change.runs' ({sorted(phase['runs'])})")
    unknown = sorted(set(phase["verdict"]["rule"]) - set(TESTS))
    if unknown:
        problems.append(f"config key '{key}.phase_change.verdict.rule' names unknown tests {unknown}; "
                        f"the tests: {list(TESTS)}")
    probes = phase["probes"]
    (a, b), (c, d) = probes["early_band"], probes["late_band"]
    early, late = probes["single_positions"]
    for name, run in phase["runs"].items():
        settings = run_settings(phase["base"], run)
        context, mixture = settings["context"], settings["mixture"]
        if not a <= b < c <= d < context:
            problems.append(f"config key '{key}.phase_change.probes.early_band/late_band' ({[a, b]}, {[c, d]}) must "
                            f"satisfy early first <= last < late first <= last < the context of run {name} ({context})")
        if not early < late < context:
            problems.append(f"config key '{key}.phase_change.probes.single_positions' ({[early, late]}) must lie "
                            f"inside the context of run {name} ({context}), early before late")
        if mixture["period_min"] > mixture["period_max"]:
            problems.append(f"config key '{key}.phase_change' run {name}: period_min > period_max")
            continue
        if mixture["repeat_fraction"] > 0 and max(b, early) > mixture["period_min"] - 2:
            problems.append(f"config key '{key}.phase_change.probes.early_band' ({[a, b]}) and single_positions' early "
                            f"position ({early}) must end by position {mixture['period_min'] - 2}, before run {name}'s "
                            f"shortest training period ({mixture['period_min']}) lets a copy help; else the ICL score "
                            "measures copying by construction")
        for problem in probe_period_problems(probes["probe_periods"], MixtureSettings(**mixture), context):
            problems.append(f"config key '{key}.phase_change.probes.probe_periods' (run {name}): {problem}")
    return problems
