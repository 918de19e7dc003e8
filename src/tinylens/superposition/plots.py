"""Figures of the superposition family, one function per figure (numpy + matplotlib only, no torch).

Each ``make_<figure>`` takes the columns of the family's tables (tinylens.tables.read_columns) and returns
the Figure; the figure's script saves it (tinylens.plots.save_figure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

# tab10 without its red, which marks the odd feature
FEATURE_COLOURS = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 3]
REGIME_COLOURS = {"not represented": "#d9d9d9", "dedicated dimension": "#6baed6", "superposition": "#fc9272",
                  "rotated, no superposition": "#bcbddc"}


def _draw_columns(ax, w: np.ndarray, highlight: int | None = None, title: str = "") -> None:
    """One 2-D model: each feature's column of W as an arrow from the origin; the unit circle for scale."""
    t = np.linspace(0, 2 * np.pi, 100)
    ax.plot(np.cos(t), np.sin(t), color="0.85", lw=0.6)
    for i, (x, y) in enumerate(w):
        colour = "crimson" if i == highlight else FEATURE_COLOURS[i % len(FEATURE_COLOURS)]
        ax.plot([0, x], [0, y], color=colour, lw=1.6 if i == highlight else 1.2)
        ax.plot([x], [y], "o", color=colour, ms=2.5)
    ax.set(xlim=(-1.35, 1.35), ylim=(-1.35, 1.35), aspect="equal", xticks=[], yticks=[])
    ax.set_title(title, fontsize=7)


def _model_columns(features: Mapping, mask: np.ndarray) -> np.ndarray:
    order = np.argsort(features["feature"][mask])
    return features["w"][mask][order]


def make_polygons(models: Mapping, features: Mapping) -> Figure:
    """Uniform sweep: the learned columns of every model, seeds down, sparsity across."""
    sparsities = np.unique(models["sparsity"])
    seeds = np.unique(models["seed"])
    fig, axes = plt.subplots(len(seeds), len(sparsities), figsize=(1.45 * len(sparsities), 1.55 * len(seeds) + 0.4),
                             squeeze=False)
    for j, s in enumerate(sparsities):
        for i, seed in enumerate(seeds):
            row = np.flatnonzero((models["sparsity"] == s) & (models["seed"] == seed))[0]
            w = _model_columns(features, (features["sparsity"] == s) & (features["seed"] == seed))
            head = f"S = {s:g}\n" if i == 0 else ""
            _draw_columns(axes[i, j], w, title=f"{head}{models['polygon'][row]} ({models['n_represented'][row]})")
        axes[0, j].title.set_fontsize(7)
    for i, seed in enumerate(seeds):
        axes[i, 0].set_ylabel(f"seed {seed}", fontsize=8)
    fig.suptitle("Uniform sparsity, n = 5 features in m = 2 dimensions: columns of W (count represented)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def make_phase_change(models: Mapping, features: Mapping, max_columns: int = 10, odd: int = 4) -> Figure:
    """Non-uniform sweep: the geometry from each start across the odd feature's density (odd in red)."""
    rel = np.unique(models["relative_density"])[::-1]  # densest first: pentagon on the left
    if len(rel) > max_columns:
        rel = rel[np.unique(np.linspace(0, len(rel) - 1, max_columns).round().astype(int))]
    start = np.asarray(models["start"], dtype=object)
    rows = ["pentagon", "two digons", "random"]
    fig, axes = plt.subplots(len(rows), len(rel), figsize=(1.45 * len(rel), 1.6 * len(rows) + 0.5), squeeze=False)
    for j, r in enumerate(rel):
        for i, name in enumerate(rows):
            sel = np.flatnonzero((start == name) & np.isclose(models["relative_density"], r))
            ax = axes[i, j]
            if len(sel) == 0:
                ax.axis("off")
                continue
            k = sel[np.argmin(models["loss"][sel])]  # random starts: the lowest-loss seed
            mask = ((np.asarray(features["start"], dtype=object) == name) & (features["seed"] == models["seed"][k])
                    & np.isclose(features["odd_density"], models["odd_density"][k]))
            head = f"odd density x{r:.3g}\n" if i == 0 else ""
            _draw_columns(ax, _model_columns(features, mask), highlight=odd,
                          title=f"{head}{models['polygon'][k]}")
    for i, name in enumerate(["from a pentagon", "from two digons", "random start (best)"]):
        axes[i, 0].set_ylabel(name, fontsize=8)
    fig.suptitle("One feature (red) sparser than the other four: the pentagon deforms, then two digons win",
                 fontsize=10)
    fig.tight_layout()
    return fig


def make_loss_crossing(models: Mapping, crossing: float | None, fixed_sparsity: float) -> Figure:
    """Loss of the pentagon and two-digon geometries across the odd feature's density.

    Each geometry's curve runs only through the runs that kept it (a start that escaped into the other
    geometry has that geometry's loss, not its own); those runs are drawn apart, as open markers.
    """
    start = np.asarray(models["start"], dtype=object)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    curves = {}
    for name, colour in (("pentagon", "C0"), ("two digons", "C3")):
        sel = start == name
        order = np.argsort(models["relative_density"][sel])
        x = models["relative_density"][sel][order]
        y = models["loss"][sel][order]
        kept = models["kept_start_geometry"][sel][order]
        curves[name] = (x, y, kept)
        ax.plot(x, np.where(kept, y, np.nan), "o-", color=colour, lw=1.2, ms=4, label=f"{name} (start kept)")
        if (~kept).any():
            ax.plot(x[~kept], y[~kept], "o", mfc="white", color=colour, ms=4, ls="none",
                    label=f"{name} start left its geometry (not on the curve)")
    rand = start == "random"
    if rand.any():
        ax.plot(models["relative_density"][rand], models["loss"][rand], ".", color="0.5", ms=4, label="random starts")
    xp, yp, kp = curves["pentagon"]
    xd, yd, kd = curves["two digons"]
    both = kp & kd
    ax2.plot(xp[both], (yp[both] - yd[both]) / yd[both], "o-", color="k", ms=3)
    ax2.axhline(0, color="0.5", lw=0.8)
    for a in (ax, ax2):
        if crossing is not None:
            a.axvline(crossing, color="k", ls="--", lw=1)
        a.set_xscale("log")
        a.grid(alpha=0.3)
    if crossing is not None:
        ax.text(crossing, ax.get_ylim()[1], f" crossing: odd density = {crossing:.3g} x the others'",
                va="top", fontsize=8)
    ax.set(yscale="log", ylabel="expected loss",
           title=f"Features 0-3 at sparsity {fixed_sparsity:g}; feature 4's density varied")
    ax.legend(fontsize=7)
    ax2.set(xlabel="density of the odd feature / density of the others",
            ylabel="(pentagon - digons) / digons")
    fig.tight_layout()
    return fig


def _fraction_lines(ax, fractions: Sequence[Fraction], axis: str = "y") -> None:
    for f in fractions:
        if axis == "y":
            ax.axhline(float(f), color="0.6", lw=0.6, ls=":")
            ax.text(1.005, float(f), str(f), transform=ax.get_yaxis_transform(), fontsize=7, va="center")
        else:
            ax.axvline(float(f), color="0.6", lw=0.6, ls=":")
            ax.text(float(f), 1.005, str(f), transform=ax.get_xaxis_transform(), fontsize=7, ha="center")


def make_dimensionality(models: Mapping, features: Mapping, fractions: Sequence[Fraction], threshold: float) -> Figure:
    """D_i of every represented feature and D* against 1/(1 - S), with the simple fractions."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    rep = features["norm"] > threshold
    x = 1 / (1 - features["sparsity"][rep])
    rng = np.random.default_rng(0)
    ax.scatter(x * np.exp(rng.uniform(-0.04, 0.04, len(x))), features["dimensionality"][rep], s=5, alpha=0.35,
               color="C0", label="D_i of each represented feature")
    order = np.argsort(models["sparsity"])
    ax.plot(1 / (1 - models["sparsity"][order]), models["dims_per_feature"][order], "k-o", ms=3,
            label="D* = m / ||W||_F^2")
    _fraction_lines(ax, fractions)
    ax.set(xscale="log", ylim=(0, 1.08), xlabel="1 / (1 - S)  (inverse feature density)",
           ylabel="dimensions per feature",
           title="Feature dimensionality across sparsity")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.2)
    fig.tight_layout()
    return fig


def make_fraction_histogram(features: Mapping, fractions: Sequence[Fraction], tolerance: float, threshold: float,
                            summary: Mapping) -> Figure:
    """Histogram of D_i (represented features) with the simple fractions and their tolerance bands."""
    rep = features["norm"] > threshold
    D = features["dimensionality"][rep]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for f in fractions:
        ax.axvspan(float(f) - tolerance, float(f) + tolerance, color="C2", alpha=0.12, lw=0)
    ax.hist(D, bins=np.arange(0, 1.05 + 0.005, 0.005), color="C0")
    _fraction_lines(ax, fractions, axis="x")
    share, chance = summary.get("share_near_fraction_in_range"), summary.get("chance_share_in_range")
    text = (f"{summary.get('represented_features', len(D))} represented features; "
            f"within {tolerance} of a fraction: {summary.get('share_near_fraction', float('nan')):.0%} of all")
    if share is not None:
        text += f",\n{share:.0%} of those with D_i >= {float(min(fractions)) - tolerance:.3f} (chance: {chance:.0%})"
    ax.set(xlabel="feature dimensionality D_i", ylabel="features", xlim=(0, 1.05), title=text)
    ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def make_dimensionality_training(training: Mapping, jumps: Mapping, sparsity: float, fractions: Sequence[Fraction],
                                 threshold: float, max_features: int = 40) -> Figure:
    """D_i of each feature represented at the end against training step, with the jumps found marked."""
    sel = np.isclose(training["sparsity"], sparsity)
    steps = np.unique(training["step"][sel])
    feats = np.unique(training["feature"][sel])
    D = np.full((len(steps), len(feats)), np.nan)
    N = np.full_like(D, np.nan)
    si = np.searchsorted(steps, training["step"][sel])
    fi = np.searchsorted(feats, training["feature"][sel])
    D[si, fi] = training["dimensionality"][sel]
    N[si, fi] = training["norm"][sel]
    shown = np.flatnonzero(N[-1] > threshold)[:max_features]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    x = np.maximum(steps, 1)
    for k, f in enumerate(shown):
        ax.plot(x, D[:, f], lw=0.8, color=plt.get_cmap("viridis")(k / max(len(shown) - 1, 1)))
    base = np.isclose(jumps["sparsity"], sparsity) & np.isin(jumps["feature"], feats[shown])
    real = np.asarray(jumps["exceeds_noise"], dtype=bool)
    for jsel, style, label in (
            (base & real, dict(mfc="none", color="crimson", ms=8, mew=1.5), "jumps (levels >= margin x noise apart)"),
            (base & ~real, dict(mfc="none", color="0.45", ms=5), "moves within the curve's noise (not jumps)")):
        if jsel.any():
            jf = np.searchsorted(feats, jumps["feature"][jsel])
            js = np.searchsorted(steps, jumps["step"][jsel])
            ax.plot(x[js], D[js, jf], "o", **style, label=f"{int(jsel.sum())} {label}")
    if base.any():
        ax.legend(fontsize=8, loc="lower right")
    _fraction_lines(ax, fractions)
    ax.set(xscale="log", ylim=(0, 1.08), xlabel="training step", ylabel="D_i",
           title=f"Feature dimensionality over training (S = {sparsity:g}; "
                 f"{len(shown)} features represented at the end)")
    ax.grid(alpha=0.2)
    fig.tight_layout()
    return fig


def _log_edges(v: np.ndarray) -> np.ndarray:
    """Cell edges around log-spaced centres (midpoints in log, half a step beyond each end)."""
    u = np.log(v)
    return np.exp(np.concatenate([[1.5 * u[0] - 0.5 * u[1]], (u[1:] + u[:-1]) / 2, [1.5 * u[-1] - 0.5 * u[-2]]]))


def make_phase_diagram(cells: Mapping, boundary: Mapping) -> Figure:
    """Regime of the extra feature per (density, relative importance) cell, with the analytic boundaries."""
    r = np.unique(cells["importance"])
    p = np.unique(cells["density"])
    names = list(REGIME_COLOURS)
    grid = np.full((len(r), len(p)), np.nan)
    ri = np.searchsorted(r, cells["importance"])
    pi = np.searchsorted(p, cells["density"])
    grid[ri, pi] = [names.index(v) for v in cells["trained_regime"]]
    fig, ax = plt.subplots(figsize=(10, 5.6))
    ax.pcolormesh(_log_edges(p), _log_edges(r), grid, cmap=ListedColormap(list(REGIME_COLOURS.values())), vmin=-0.5,
                  vmax=len(names) - 0.5)
    wrong = np.asarray(cells["trained_regime"], dtype=object) != np.asarray(cells["analytic_regime"], dtype=object)
    ax.plot(cells["density"][wrong], cells["importance"][wrong], "x", color="k", ms=5,
            label="trained regime differs from the analytic one")
    b = np.asarray(boundary["analytic_density"])
    br = np.asarray(boundary["importance"])
    ok = np.isfinite(b)
    ax.plot(b[ok], br[ok], "k-", lw=2, label="analytic boundary of superposition")
    top = b[ok][np.argmin(np.abs(np.log(br[ok])))] if ok.any() else p[0]
    ax.plot([top, p[-1] * 1.2], [1, 1], "k--", lw=1.5, label="analytic: r = 1 (which feature keeps the dimension)")
    tb = np.asarray(boundary["trained_density"])
    okt = np.isfinite(tb)
    ax.plot(tb[okt], br[okt], "s", mfc="none", color="0.2", ms=5, label="trained boundary (between cells)")
    for k, name in enumerate(names):
        if np.any(grid == k):
            ax.plot([], [], "s", color=REGIME_COLOURS[name], ms=9, label=f"trained: {name}")
    ax.set(xscale="log", yscale="log", xlabel="feature density 1 - S",
           ylabel="relative importance r of the extra feature",
           title="n = 2 features, m = 1 dimension: where the extra feature goes")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), framealpha=0.9)
    fig.tight_layout()
    return fig


GROUP_COLOURS = ["C0", "C3", "C2", "C1", "C4", "C5"]
PAIR_LABELS = {"same correlated group": "within a\ncorrelated group",
               "same anticorrelated group": "within an anti-\ncorrelated group", "different groups": "different\ngroups"}


def make_correlated(models: Mapping, features: Mapping, pairs: Mapping, max_seeds: int = 6) -> Figure:
    """Feature groups: each setting's learned columns (one colour per group) for its first seeds, and the
    cosines of its pairs of represented features by pair type, as in the source's correlated-features figure."""
    m_setting = np.asarray(models["setting"], dtype=object)
    names = list(dict.fromkeys(m_setting))
    seeds = np.unique(models["seed"])[:max_seeds]
    f_setting = np.asarray(features["setting"], dtype=object)
    p_setting, p_type = np.asarray(pairs["setting"], dtype=object), np.asarray(pairs["pair_type"], dtype=object)
    types = ["same correlated group", "same anticorrelated group", "different groups"]
    fig, axes = plt.subplots(len(names), len(seeds) + 1, squeeze=False,
                             figsize=(1.45 * len(seeds) + 3.2, 1.6 * len(names) + 0.6),
                             gridspec_kw={"width_ratios": [1] * len(seeds) + [2.2]})
    for r, name in enumerate(names):
        row = np.flatnonzero(m_setting == name)[0]
        for c, seed in enumerate(seeds):
            ax = axes[r, c]
            mask = (f_setting == name) & (features["seed"] == seed)
            order = np.argsort(features["feature"][mask])
            w, grp = features["w"][mask][order], features["group"][mask][order]
            t = np.linspace(0, 2 * np.pi, 100)
            ax.plot(np.cos(t), np.sin(t), color="0.85", lw=0.6)
            for (x, y), g in zip(w, grp):
                colour = GROUP_COLOURS[int(g) % len(GROUP_COLOURS)]
                ax.plot([0, x], [0, y], color=colour, lw=1.3)
                ax.plot([x], [y], "o", color=colour, ms=2.5)
            ax.set(xlim=(-1.35, 1.35), ylim=(-1.35, 1.35), aspect="equal", xticks=[], yticks=[])
            if r == 0:
                ax.set_title(f"seed {seed}", fontsize=7)
        axes[r, 0].set_ylabel(f"{name}\n{models['kind'][row]}, S = {models['sparsity'][row]:g}", fontsize=7)
        ax = axes[r, -1]
        here = p_setting == name
        shown = [t for t in types if np.any(here & (p_type == t))]
        for k, t in enumerate(shown):
            v = np.asarray(pairs["cos"])[here & (p_type == t)]
            jitter = np.random.default_rng(k).uniform(-0.15, 0.15, len(v))
            ax.plot(v, k + jitter, "o", ms=3, alpha=0.5, color=f"C{types.index(t)}", label=t)
        for x0 in (-0.8, -0.2, 0.2, 0.8):
            ax.axvline(x0, color="0.7", lw=0.6, ls=":")
        ax.set(xlim=(-1.05, 1.05), ylim=(-0.6, max(len(shown), 1) - 0.4), yticks=range(len(shown)))
        ax.set_yticklabels([PAIR_LABELS[t] for t in shown], fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        if r == len(names) - 1:
            ax.set_xlabel("cos(W_i, W_j) of represented pairs", fontsize=8)
    fig.suptitle("Feature groups in m = 2 dimensions: columns of W (colour = group) and pair cosines by type",
                 fontsize=10)
    fig.tight_layout()
    return fig
