"""Figures of the circuits family: ``make_<figure>`` builds one from plain data and returns the Figure
(the figure's script saves it with tinylens.plots.save_figure)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from tinylens.circuits.schemas import KINDS
from tinylens.circuits.training import VARIANTS, formation, layer_pair_max, variant_name, with_excess
from tinylens.plots import plt

KIND_COLORS = {"Q": "C0", "K": "C1", "V": "C2"}
TRANSFORM_TITLES = {"permutation": "permutation", "orthogonal": "random orthogonal",
                    "orthogonal_fixing_ones": "orthogonal, fixes 1", "scaling": "scaling"}


def _title(name: str) -> str:
    if name.startswith("cond"):
        return f"invertible, cond {name[4:]}"
    return TRANSFORM_TITLES.get(name, name)


def _select(df: pl.DataFrame, basis: str, layernorm: str, kind: str) -> pl.DataFrame:
    return df.filter((pl.col("basis") == basis) & (pl.col("layernorm") == layernorm) & (pl.col("kind") == kind))


def make_composition_heatmaps(scores: pl.DataFrame, n_layer: int, n_head: int) -> Figure:
    """Score minus baseline of every (earlier head, later head) pair: rows Q/K/V, columns basis x LayerNorm."""
    scores = with_excess(scores)
    n = n_layer * n_head
    fig, axes = plt.subplots(len(KINDS), len(VARIANTS), figsize=(3.6 * len(VARIANTS), 3.3 * len(KINDS)), squeeze=False)
    labels = [f"{layer + 1}.{head + 1}" for layer in range(n_layer) for head in range(n_head)]  # from 1, for people
    step = max(1, n // 12)
    for j, (basis, layernorm) in enumerate(VARIANTS):
        for i, kind in enumerate(KINDS):
            ax = axes[i][j]
            sel = _select(scores, basis, layernorm, kind)
            grid = np.full((n, n), np.nan)
            a = sel["layer_a"].to_numpy() * n_head + sel["head_a"].to_numpy()
            b = sel["layer_b"].to_numpy() * n_head + sel["head_b"].to_numpy()
            grid[a, b] = sel["excess"].to_numpy()
            vmax = float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0
            im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
            for edge in range(1, n_layer):
                ax.axhline(edge * n_head - 0.5, color="grey", lw=0.4)
                ax.axvline(edge * n_head - 0.5, color="grey", lw=0.4)
            ax.set_xticks(range(0, n, step), labels[::step], fontsize=6, rotation=90)
            ax.set_yticks(range(0, n, step), labels[::step], fontsize=6)
            base = sel["baseline_mean"].mean()
            ax.set_title(f"{kind}-comp., {basis} basis, LN {layernorm}\nbaseline {base:.3f}", fontsize=8)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03).ax.tick_params(labelsize=6)
            if i == len(KINDS) - 1:
                ax.set_xlabel("later head B (layer.head)", fontsize=7)
            if j == 0:
                ax.set_ylabel("earlier head A (layer.head)", fontsize=7)
    steps = sorted(set(scores["step"].to_list()))
    fig.suptitle(f"Composition score minus the random-head baseline (original model, step {', '.join(map(str, steps))})",
                 fontsize=10)
    fig.tight_layout()
    return fig


def make_composition_symmetry(table: pl.DataFrame, digest: dict) -> Figure:
    """Scores before vs after each T: residual basis (coloured by kind) and token basis (black)."""
    names = list(digest)
    ncols = min(3, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.8 * ncols, 4.0 * nrows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    lo = float(min(table["score_before"].min(), table["score_after"].min()))
    hi = float(max(table["score_before"].max(), table["score_after"].max()))
    for ax, name in zip(axes.flat, names):
        sel = table.filter(pl.col("transform") == name)
        for kind in KINDS:
            r = sel.filter((pl.col("basis") == "residual") & (pl.col("kind") == kind))
            ax.scatter(r["score_before"], r["score_after"], s=5, alpha=0.5, color=KIND_COLORS[kind],
                       label=f"residual {kind}")
        t = sel.filter(pl.col("basis") == "token")
        ax.scatter(t["score_before"], t["score_after"], s=6, marker="x", lw=0.6, color="black", label="token (all)")
        ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=0.8)
        tau = digest[name]["kendall_tau"]
        ax.set_title(f"{_title(name)}\nresidual tau Q {tau['Q']:.2f} K {tau['K']:.2f} "
                     f"V {tau['V']:.2f}", fontsize=8)
        ax.set_xlabel("score, trained weights", fontsize=8)
        ax.set_ylabel("score, weights transformed by T", fontsize=8)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6, loc="upper left")
    fig.suptitle("Same model, different weights: residual-basis scores move, token-basis scores stay (LN ignored)",
                 fontsize=10)
    return fig


def make_composition_kendall_tau(digest: dict) -> Figure:
    """The symmetry test as a table: rank agreement, score and logit changes per T."""
    names = list(digest)
    header = ["T", "cond(T)", "tau Q", "tau K", "tau V", "max rank\nchange Q/K/V", "token max\n|d score|",
              "LN-free max\n|d logit|", "real, LN folded\nmax |d logit|", "same, LN\neps = 0",
              "real, LN as\ntrained max |d logit|", "real model\nunchanged"]
    rows = []
    for name in names:
        e = digest[name]
        rows.append([_title(name), f"{e['condition_number']:.3g}",
                     *(f"{e['kendall_tau'][k]:.3f}" for k in KINDS),
                     "/".join(str(e["max_rank_change"][k]) for k in KINDS),
                     f"{e['token_max_abs_score_change']:.1e}", f"{e['layernorm_free_max_logit_change']:.1e}",
                     f"{e['real_fold_max_logit_change']:.1e}", f"{e['real_fold_eps0_max_logit_change']:.1e}",
                     f"{e['real_untouched_max_logit_change']:.1e}",
                     "yes" if e["real_model_survives"] else ("up to eps" if e["real_model_survives_without_eps"] else "no")])
    fig, ax = plt.subplots(figsize=(15, 0.55 * (len(rows) + 2)))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=header, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.auto_set_column_width(list(range(len(header))))
    table.scale(1, 2.2)
    ax.set_title("Symmetry test: Kendall's tau of the residual-basis pair ranking before vs after T, "
                 "and what changes", fontsize=10)
    return fig


def make_composition_over_training(over: dict[int, pl.DataFrame], original: int, n: int, kind: str = "K",
                                   windows: Mapping[int, tuple[float, float]] | None = None) -> Figure:
    """K-composition of each seed's strongest final pairs at every checkpoint, with the baseline band.

    windows: per seed, the (start, end) steps of the training-dynamics family's phase-change window
    (:func:`tinylens.dynamics.summary.phase_change_windows`: only seeds where one was detected), shaded on
    that seed's panels; a seed without one says so in its legend and has nothing shaded.
    """
    seeds = sorted(over, key=lambda s: (s != original, s))
    variants = [v for v in VARIANTS if v[1] == "ignored"]
    fig, axes = plt.subplots(len(variants), len(seeds), figsize=(4 * len(seeds), 3.2 * len(variants)),
                             squeeze=False, sharex=True)
    for j, seed in enumerate(seeds):
        curves = formation(over[seed], n, kind)
        for i, (basis, layernorm) in enumerate(variants):
            ax = axes[i][j]
            pairs = curves[variant_name(basis, layernorm)]
            for p_i, p in enumerate(pairs):
                (line,) = ax.plot(p["steps"], p["scores"], marker=".", ms=3, lw=1.2, color=f"C{p_i}",
                                  label=f"{people_pair(p['pair'])} (formed {p['formed_at']})")
                if p["formed_at"] is not None:
                    k = p["steps"].index(p["formed_at"])
                    ax.plot([p["formed_at"]], [p["scores"][k]], "o", ms=6, mfc="none", color=line.get_color())
            if pairs:
                steps = np.array(pairs[0]["steps"])
                mean = np.mean([p["baseline_mean"] for p in pairs], axis=0)
                std = np.mean([p["baseline_std"] for p in pairs], axis=0)
                ax.fill_between(steps, mean - 3 * std, mean + 3 * std, color="grey", alpha=0.25, label="baseline +- 3 sd")
            if windows is not None and seed in windows:
                ax.axvspan(*windows[seed], color="tab:orange", alpha=0.15, lw=0,
                           label="phase-change window (training dynamics)")
            elif windows is not None:
                ax.plot([], [], " ", label="no phase change detected (training dynamics)")
            ax.set_xscale("symlog", linthresh=max(1, int(pairs[0]["steps"][1]) if pairs and len(pairs[0]["steps"]) > 1 else 1))
            ax.set_title(f"seed {seed}{' (original)' if seed == original else ''}: {kind}-comp., {basis} basis",
                         fontsize=8)
            ax.legend(fontsize=5.5)
            ax.grid(alpha=0.3)
            if i == len(variants) - 1:
                ax.set_xlabel("training step (symlog)", fontsize=8)
            if j == 0:
                ax.set_ylabel("composition score", fontsize=8)
    fig.suptitle(f"When do the strongest {kind}-composition pairs form? (open circle: stays above baseline + 3 sd)",
                 fontsize=10)
    fig.tight_layout()
    return fig



def people_pair(label: str) -> str:
    """A pair label of the metrics (``"0.1 -> 2.3"``, layer.head from 0) as people read it, from 1 (``"1.2 -> 3.4"``)."""
    return " -> ".join(".".join(str(int(x) + 1) for x in side.split(".")) for side in label.split(" -> "))


def make_composition_across_seeds(scores: pl.DataFrame, original: int, n_layer: int, across: dict) -> Figure:
    """Per seed, the largest excess over heads of each layer pair (head labels differ between seeds)."""
    seeds = sorted(scores["seed"].unique().to_list(), key=lambda s: (s != original, s))
    rows = [(basis, kind) for basis in ("residual", "token") for kind in KINDS]
    fig, axes = plt.subplots(len(rows), len(seeds), figsize=(2.9 * len(seeds), 2.6 * len(rows)), squeeze=False,
                             layout="constrained")
    for i, (basis, kind) in enumerate(rows):
        sel = _select(scores, basis, "ignored", kind)
        grids = {s: layer_pair_max(sel.filter(pl.col("seed") == s), n_layer) for s in seeds}
        vmax = max(float(np.nanmax(np.abs(g))) for g in grids.values())
        for j, seed in enumerate(seeds):
            ax = axes[i][j]
            im = ax.imshow(grids[seed], cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            entry = across[variant_name(basis, "ignored")][kind]
            note = "original" if seed == original else \
                f"tau {entry['alternates'][str(seed)]['kendall_tau_layer_pairs']:.2f}, " \
                f"shared {entry['alternates'][str(seed)]['shared_strongest']}"
            ax.set_title(f"seed {seed}: {kind}, {basis}\n{note}", fontsize=7)
            ax.set_xticks(range(n_layer), [str(b + 1) for b in range(n_layer)])  # layers from 1, for people
            ax.set_yticks(range(n_layer), [str(b + 1) for b in range(n_layer)])
            ax.tick_params(labelsize=6)
            if i == len(rows) - 1:
                ax.set_xlabel("layer of B", fontsize=7)
            if j == 0:
                ax.set_ylabel("layer of A", fontsize=7)
        fig.colorbar(im, ax=list(axes[i]), fraction=0.02, pad=0.01).ax.tick_params(labelsize=6)
    fig.suptitle("Strongest composition per layer pair, every seed (max over heads of score - baseline, LN ignored)",
                 fontsize=10)
    return fig
