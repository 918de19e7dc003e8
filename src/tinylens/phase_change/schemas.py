"""This family's tables (results/<preset>/phase_change/<run>/): their Parquet schemas.

Free of torch, so the summary and figure jobs start quickly.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tinylens.tables import Schema

#: Float columns of the curves table measured at every checkpoint.
CURVE_COLUMNS = ("tokens", "lr", "train_loss", "val_loss", "icl", "icl_se", "icl_single", "icl_single_se",
                 "mixture_loss", "mixture_icl", "mixture_icl_se", "copy_loss_drop", "copy_loss_drop_se",
                 "energy", "kl_unigram", "cpu_seconds")
#: Loss per context position, natural text and the training mixture, ``[checkpoint context]``.
POSITION_COLUMNS = ("loss_by_position", "mixture_loss_by_position")
#: Measured at the last checkpoint only (NaN elsewhere): the ICL score on ``final_windows`` windows.
FINAL_COLUMNS = ("final_icl", "final_icl_se", "final_icl_single", "final_icl_single_se")


def curves_schema(context: int) -> Schema:
    """One row per checkpoint."""
    return Schema("phase-change curves", {
        "step": pa.int64(),
        **{name: pa.float64() for name in CURVE_COLUMNS},
        **{name: pa.float64() for name in FINAL_COLUMNS},
        "loss_by_position": pa.list_(pa.float64(), context),  # natural validation text
        "mixture_loss_by_position": pa.list_(pa.float64(), context),  # the training mixture's held-out windows
    })


HEADS_SCHEMA = Schema("phase-change heads", {
    "step": pa.int64(),
    "layer": pa.int32(),
    "head": pa.int32(),
    "period": pa.int32(),
    "prefix_matching": pa.float64(),
    "prefix_matching_se": pa.float64(),
    "copying": pa.float64(),
})


def rows_to_columns(rows: list[dict], names) -> dict[str, list]:
    """Rows (dicts) -> columns, a name missing from a row read as NaN (the tables hold no nulls)."""
    return {name: [r.get(name, float("nan")) for r in rows] for name in names}


def check_config(preset: Mapping, config: Mapping, where: str) -> list[str]:
    """What the schema cannot say of a preset's ``phase_change`` (``where``: the preset's key,
    ``presets.<name>``): the reference is a run, and in every run the ICL bands and probe periods fit the
    context and the probes avoid the training periods."""
    phase, key = preset["phase_change"], where
    problems = []
    if phase["reference"] not in phase["runs"]:
        problems.append(f"config key '{key}.phase_change.reference' ({phase['reference']!r}) must name one of "
                        f"'{key}.phase_change.runs' ({sorted(phase['runs'])})")
    probes = phase["probes"]
    for name, run in phase["runs"].items():
        settings = {**phase["base"], **run, "mixture": {**phase["base"]["mixture"], **run.get("mixture", {})}}
        context, mixture = settings["context"], settings["mixture"]
        (a, b), (c, d) = probes["early_band"], probes["late_band"]
        if not a <= b < c <= d < context:
            problems.append(f"config key '{key}.phase_change.probes.early_band/late_band' ({[a, b]}, {[c, d]}) must "
                            f"satisfy early first <= last < late first <= last < the context of run {name} ({context})")
        early, late = probes["single_positions"]
        if not early < late < context:
            problems.append(f"config key '{key}.phase_change.probes.single_positions' ({[early, late]}) must lie "
                            f"inside the context of run {name} ({context}), early before late")
        if mixture["period_min"] > mixture["period_max"]:
            problems.append(f"config key '{key}.phase_change' run {name}: period_min > period_max")
        for p in probes["probe_periods"]:
            if mixture["repeat_fraction"] > 0 and mixture["period_min"] <= p <= mixture["period_max"]:
                problems.append(f"config key '{key}.phase_change.probes.probe_periods': {p} lies among run {name}'s "
                                f"training periods {mixture['period_min']}-{mixture['period_max']}; probe at others")
            if 2 * p > context + 1:
                problems.append(f"config key '{key}.phase_change.probes.probe_periods': {p} repeated twice exceeds "
                                f"run {name}'s context ({context})")
    return problems
