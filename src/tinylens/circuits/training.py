"""Composition over training and across seeds, and the family's headline summary.

Tables are the :data:`tinylens.circuits.schemas.SCORES_SCHEMA` columns as polars frames. A
pair's *excess* is its score minus the random-head baseline mean, its *z* that excess over the
baseline std. Head indices within a layer are arbitrary labels (two seeds' head 2 of layer 1 have
nothing in common), so pairs are compared across seeds by layer pair: for each ``(l_A, l_B)``
the largest excess over its heads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from tinylens.circuits.schemas import KINDS, pair_label
from tinylens.measures import kendall_tau

VARIANTS = [("residual", "ignored"), ("token", "ignored"), ("residual", "folded"), ("token", "folded")]


def variant_name(basis: str, layernorm: str) -> str:
    """``"residual/ignored"``: the key of one basis and LayerNorm treatment in the summaries."""
    return f"{basis}/{layernorm}"


def scores_over_training(model_dir: str | Path, seed: int, samples: int, baseline_seed: int,
                         kinds: tuple[str, ...] = ("K",), layernorms: tuple[str, ...] = ("ignored",),
                         progress: Callable | None = None) -> dict[str, np.ndarray | list]:
    """Scores of every pair at every checkpoint of ``model_dir`` (columns of ``SCORES_SCHEMA``, ``step`` =
    checkpoint step; tinylens.weights lists and loads them). By default K-composition with LayerNorm
    ignored, in both bases: the folded baselines differ per layer pair and would cost ``n_layer`` times
    more at every checkpoint."""
    from tinylens.circuits.composition import score_table  # torch: the summaries and figures never get here
    from tinylens.weights import checkpoint_steps, load_checkpoint

    parts = []
    steps = checkpoint_steps(model_dir)
    for step in (progress(steps) if progress else steps):
        model = load_checkpoint(model_dir, step)
        parts.append(score_table(model, seed, step, samples, baseline_seed, kinds, layernorms))
    return {k: (np.concatenate([p[k] for p in parts]) if isinstance(parts[0][k], np.ndarray)
                else [v for p in parts for v in p[k]]) for k in parts[0]}


def with_excess(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        excess=pl.col("score") - pl.col("baseline_mean"),
        z=(pl.col("score") - pl.col("baseline_mean")) / pl.col("baseline_std"),
    )


def top_pairs(df: pl.DataFrame, n: int) -> dict[str, dict[str, list[dict]]]:
    """The ``n`` pairs of largest excess per variant and kind, with score and baseline.

    df: one model's scores (one seed, one step). Returns ``{variant: {kind: [row, ...]}}``.
    """
    df = with_excess(df)
    out: dict[str, dict[str, list[dict]]] = {}
    for basis, layernorm in VARIANTS:
        for kind in KINDS:
            sel = df.filter((pl.col("basis") == basis) & (pl.col("layernorm") == layernorm) & (pl.col("kind") == kind))
            if sel.height == 0:
                continue
            rows = sel.sort("excess", descending=True).head(n).to_dicts()
            out.setdefault(variant_name(basis, layernorm), {})[kind] = [{
                "pair": pair_label(r["layer_a"], r["head_a"], r["layer_b"], r["head_b"]),
                "layer_a": r["layer_a"], "head_a": r["head_a"], "layer_b": r["layer_b"], "head_b": r["head_b"],
                "score": r["score"], "baseline_mean": r["baseline_mean"], "baseline_std": r["baseline_std"],
                "z": r["z"],
            } for r in rows]
    return out


def layer_pair_max(df: pl.DataFrame, n_layer: int) -> np.ndarray:
    """``[n_layer n_layer]``: the largest excess over the heads of each layer pair (NaN off the upper triangle)."""
    g = with_excess(df).group_by(["layer_a", "layer_b"]).agg(pl.col("excess").max())
    out = np.full((n_layer, n_layer), np.nan)
    out[g["layer_a"].to_numpy(), g["layer_b"].to_numpy()] = g["excess"].to_numpy()
    return out


def across_seeds(df: pl.DataFrame, original: int, n_layer: int, n: int) -> dict[str, dict]:
    """Are the strongest pairs the same across seeds? Per variant and kind, for every alternate:
    Kendall's tau between its and the original's layer-pair maxima, and how many of the original's
    ``n`` strongest layer pairs are among its own ``n`` strongest."""
    out: dict[str, dict] = {}
    seeds = sorted(df["seed"].unique().to_list(), key=lambda s: (s != original, s))
    iu = np.triu_indices(n_layer, k=1)
    for basis, layernorm in VARIANTS:
        for kind in KINDS:
            sel = df.filter((pl.col("basis") == basis) & (pl.col("layernorm") == layernorm) & (pl.col("kind") == kind))
            if sel.height == 0:
                continue
            maxima = {s: layer_pair_max(sel.filter(pl.col("seed") == s), n_layer)[iu] for s in seeds}
            labels = [f"{a}->{b}" for a, b in zip(*iu)]

            def strongest(v, labels=labels):
                return [labels[i] for i in np.argsort(-v, kind="stable")[:n]]
            entry = {"strongest_layer_pairs": {str(s): strongest(maxima[s]) for s in seeds}, "alternates": {}}
            for s in seeds[1:]:
                entry["alternates"][str(s)] = {
                    "kendall_tau_layer_pairs": kendall_tau(maxima[original], maxima[s]),
                    "shared_strongest": len(set(strongest(maxima[original])) & set(strongest(maxima[s]))),
                }
            out.setdefault(variant_name(basis, layernorm), {})[kind] = entry
    return out


def formation(df: pl.DataFrame, n: int, kind: str = "K", z_formed: float = 3.0) -> dict[str, list[dict]]:
    """When do the strongest pairs form? df: one seed's scores over checkpoints.

    The ``n`` pairs of largest excess at the last checkpoint, per variant; for each: its score at
    every step, ``formed_at`` (the first step from which z stays at least ``z_formed`` through the
    last checkpoint; None if it never does) and ``half_rise_at`` (the first step whose excess reaches
    half the final excess).
    """
    df = with_excess(df.filter(pl.col("kind") == kind))
    last = df["step"].max()
    out: dict[str, list[dict]] = {}
    for basis, layernorm in VARIANTS:
        sel = df.filter((pl.col("basis") == basis) & (pl.col("layernorm") == layernorm))
        if sel.height == 0:
            continue
        final = sel.filter(pl.col("step") == last).sort("excess", descending=True).head(n)
        pairs = []
        for r in final.to_dicts():
            key = ("layer_a", "head_a", "layer_b", "head_b")
            curve = sel.filter(pl.all_horizontal(pl.col(k) == r[k] for k in key)).sort("step")
            steps, z, excess = curve["step"].to_list(), curve["z"].to_numpy(), curve["excess"].to_numpy()
            above = z >= z_formed
            # First index from which every later checkpoint is above: after the last one below.
            below = np.nonzero(~above)[0]
            formed = (int(below[-1]) + 1) if len(below) else 0
            half = np.nonzero(excess >= 0.5 * excess[-1])[0] if excess[-1] > 0 else np.array([], dtype=int)
            pairs.append({
                "pair": pair_label(*(r[k] for k in key)),
                "final_score": r["score"], "final_z": r["z"],
                "formed_at": steps[formed] if formed < len(steps) else None,
                "half_rise_at": steps[int(half[0])] if len(half) else None,
                "steps": steps, "scores": curve["score"].to_list(),
                "baseline_mean": curve["baseline_mean"].to_list(), "baseline_std": curve["baseline_std"].to_list(),
            })
        out[variant_name(basis, layernorm)] = pairs
    return out
