"""The training-dynamics figures: ``make_<figure>`` builds one and returns the Figure (its script saves
it); a seed's phase-change window is shaded only where a phase change was detected in it (otherwise the
legend says none was, and nothing is drawn): an external model's induction-head onset (§8b) where its summary
has one (:func:`tinylens.dynamics.summary.drawn_window`).

Steps go on a symmetric-log axis, linear below the first log-spaced checkpoint, so step 0 (the
initialisation) stays on the figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

import numpy as np
from matplotlib.figure import Figure

from tinylens.dynamics.phases import log_position_derivative
from tinylens.dynamics.schemas import depth_names
from tinylens.dynamics.summary import HEADLINE_DEPTH, Curves, drawn_window
from tinylens.plots import plt, step_axis


def _shade(ax, summaries: Mapping[str, dict], horizontal: bool = False) -> None:
    """The window of every seed in which a phase change was detected, lightly (overlaps darken); where none
    was, nothing is shaded and a legend entry says so. An external suite's checkpoints left out of detection
    (they repeat weights) are dotted lines."""
    left_out = sorted({step for s in summaries.values() for step in s.get("integrity", {}).get("left_out", [])})
    for i, step in enumerate(left_out):  # an external suite's checkpoints that repeat weights (tinylens.phase_change.integrity)
        line = ax.axhline if horizontal else ax.axvline
        line(step, color="tab:red", lw=0.8, ls=":",
             label="checkpoint repeating weights, left out of detection" if i == 0 else None)
    windows = {seed: drawn_window(s) for seed, s in summaries.items()}
    detected = {seed: w for seed, w in windows.items() if w is not None}
    if not detected:
        ax.plot([], [], " ", label=f"no phase change detected (0 of {len(summaries)} seeds): no window drawn")
        return
    for i, w in enumerate(detected.values()):
        label = (f"phase-change window, per seed where detected ({len(detected)} of {len(summaries)})"
                 if i == 0 else None)
        span = ax.axhspan if horizontal else ax.axvspan
        span(w["start"], w["end"], color="tab:orange", alpha=0.12, label=label)


def _common_steps(curves: Mapping[str, Curves]) -> tuple[np.ndarray, dict[str, Curves]]:
    """The checkpoint steps every seed has, and each seed's curves at those steps only: a seed trained
    longer (the paper's 1442, to its own last step) has checkpoints the others lack."""
    steps = reduce(np.intersect1d, (c.steps for c in curves.values()))
    if len(steps) < 2:
        raise ValueError(f"the seeds share {len(steps)} checkpoint steps; every seed must be trained on the "
                         "preset's checkpoint schedule (retrain with the current config)")
    return steps, {seed: c.at(steps) for seed, c in curves.items()}


def _mean_band(ax, steps, values: np.ndarray, color: str, label: str) -> None:
    """values: [seed checkpoint] -> mean line and min-max band."""
    ax.fill_between(steps, values.min(0), values.max(0), color=color, alpha=0.2, lw=0)
    ax.plot(steps, values.mean(0), color=color, lw=1.8, label=label)


def make_energy_kl(curves: Mapping[str, Curves], summaries: Mapping[str, dict], n_layer: int) -> Figure:
    """IE after ln_f, KL to the unigram (both directions) and the unigram direction's KL against step:
    mean over seeds (at the steps all seeds share) with the min-max spread; each seed's IE and KL
    critical points as markers."""
    steps, curves = _common_steps(curves)
    depth = depth_names(n_layer).index(HEADLINE_DEPTH)
    fig, axes = plt.subplots(3, 1, figsize=(8, 10), sharex=True)
    ie = np.stack([c.metrics["ie"][:, depth] for c in curves.values()])
    _mean_band(axes[0], steps, ie, "tab:blue", f"IE of the token states after {HEADLINE_DEPTH} (mean, min-max of seeds)")
    ie_prefix = np.stack([c.metrics["ie_prefix"][:, depth] for c in curves.values()])
    axes[0].plot(steps, ie_prefix.mean(0), color="tab:blue", ls="--", lw=1, label="IE over prefixes (causal check)")
    axes[0].set_ylabel("interaction energy")
    kl_mu = np.stack([c.metrics["kl_model_unigram"] for c in curves.values()])
    kl_um = np.stack([c.metrics["kl_unigram_model"] for c in curves.values()])
    _mean_band(axes[1], steps, kl_mu, "tab:red", "KL(model || unigram)")
    _mean_band(axes[1], steps, kl_um, "tab:purple", "KL(unigram || model)")
    axes[1].set_ylabel("KL to the unigram (nats)")
    for summary in summaries.values():
        for ax, key in ((axes[0], "ie_critical_points"), (axes[1], "kl_critical_points")):
            for p in summary["ie_kl"][key]:
                ax.plot(p["step"], p["value"], "v" if p["kind"] == "min" else "^", color="k", ms=4)
    direction = np.stack([c.metrics["unigram_direction_kl"] for c in curves.values()])
    _mean_band(axes[2], steps, np.maximum(direction, 1e-6), "tab:green", "min over x of KL(unigram || lm_head(ln_f(x)))")
    axes[2].set_yscale("log")
    axes[2].set_ylabel("unigram direction: KL (nats)")
    for ax in axes:
        _shade(ax, summaries)
        step_axis(ax, steps, label=ax is axes[-1])
        ax.legend(fontsize=7)
    axes[0].set_title("Interaction energy and distance from the unigram over training "
                      "(markers: smoothed critical points, each seed)")
    return fig


def make_icl_score(curves: Mapping[str, Curves], summaries: Mapping[str, dict], icl_positions, icl_bands,
                   original: str) -> Figure:
    """Per seed: the band ICL score (+- 2 standard errors), the single-position one (dashed), and the
    validation loss against step (each seed at its own checkpoints)."""
    fig, (ax_icl, ax_loss) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True)
    early, late = icl_positions
    for i, (seed, c) in enumerate(curves.items()):
        color = f"C{i}"
        lw = 2 if seed == original else 1.2
        steps, icl, se = c.steps, c.metrics["icl_band"], c.metrics["icl_band_se"]
        ax_icl.plot(steps, c.metrics["icl_score"], color=color, lw=0.8, ls="--", alpha=0.7)
        ax_icl.fill_between(steps, icl - 2 * se, icl + 2 * se, color=color, alpha=0.12, lw=0)
        ax_icl.plot(steps, icl, color=color, lw=lw,
                    label=f"seed {seed}: final (step {steps[-1]}) {icl[-1]:+.3f} +- {se[-1]:.3f}")
        ax_loss.plot(steps, c.metrics["val_loss"], color=color, lw=lw,
                     label=f"seed {seed}" + ("; loss non-convex in the window" if summaries[seed]["loss_bump"]["nonconvex"] else ""))
    ax_icl.axhline(0, color="grey", lw=0.8)
    (a, b), (c_, d) = icl_bands
    ax_icl.set_ylabel(f"ICL score (nats): mean loss at tokens {c_ + 1}-{d + 1}\nminus at tokens {a + 1}-{b + 1}\n"
                      f"(dashed: token {late + 1} minus token {early + 1})")
    ax_loss.set_ylabel("validation loss (nats/char)")
    every_step = reduce(np.union1d, (c.steps for c in curves.values()))
    for ax in (ax_icl, ax_loss):
        _shade(ax, summaries)
        step_axis(ax, every_step, label=ax is ax_loss)
        ax.legend(fontsize=7)
    ax_icl.set_title("In-context learning score (band: +- 2 standard errors over windows) and validation loss")
    return fig


def make_loss_by_position(curves: Curves, summary: dict, seed: str, width: float) -> Figure:
    """One seed: validation loss at every context position x checkpoint, and its derivative in log
    position (after smoothing over ``width`` decades of token index)."""
    steps, loss = curves.steps, curves.metrics["loss_by_position"]  # [checkpoint context]
    tokens = np.arange(1, loss.shape[1] + 1)
    derivative = log_position_derivative(loss, width)
    rows = np.arange(len(steps) + 1) - 0.5
    x_edges = np.concatenate([[0.75], tokens + 0.5])
    fig, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    mesh = axes[0].pcolormesh(x_edges, rows, loss, cmap="viridis", shading="flat")
    fig.colorbar(mesh, ax=axes[0], label="validation loss (nats)")
    limit = float(np.quantile(np.abs(derivative[:, 1:]), 0.98)) or 1.0
    mesh = axes[1].pcolormesh(x_edges, rows, derivative, cmap="RdBu_r", vmin=-limit, vmax=limit, shading="flat")
    fig.colorbar(mesh, ax=axes[1], label="d loss / d ln(token index) (nats)")
    w = drawn_window(summary) or summary["window"]
    window_rows = np.interp(np.log10([w["start"], w["end"]]), np.log10(np.maximum(steps, 1e-9))[1:], np.arange(1, len(steps)))
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("token index in the context (log)")
        if drawn_window(summary) is not None:
            ax.axhspan(*window_rows, facecolor="none", edgecolor="tab:orange", lw=1.5, ls="--",
                       label="phase-change window")
    axes[0].set_yticks(np.arange(len(steps)))
    axes[0].set_yticklabels([str(s) for s in steps], fontsize=6)
    axes[0].set_ylabel("checkpoint (training step)")
    axes[0].set_title(f"seed {seed}: loss per position")
    axes[1].set_title(f"its derivative in log position, smoothed over {width:g} decades\n"
                      "(blue: later tokens predicted better)")
    if drawn_window(summary) is not None:
        axes[1].legend(fontsize=7, loc="upper right")
    return fig


def make_head_scores(curves: Curves, summary: dict, seed: str, uniform_baseline: float) -> Figure:
    """One seed: every head's prefix-matching and copying scores against step; the best head in black."""
    steps = curves.steps
    best = summary["best_head"]
    b_best, h_best = best["block"], best["head"]  # 0-based
    panels = (("prefix_matching", "prefix-matching score"), ("copying_eigen", "copying score (OV eigenvalues)"),
              ("copying_logit", "copying score (direct logits)"))
    n_layer, n_head = curves.heads["prefix_matching"].shape[1:]
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.9, n_layer))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 10.5), sharex=True)
    for ax, (name, label) in zip(axes, panels):
        values = curves.heads[name]
        for b in range(n_layer):
            for h in range(n_head):
                if (b, h) != (b_best, h_best):
                    ax.plot(steps, values[:, b, h], color=colors[b], lw=0.8, alpha=0.7,
                            label=f"block {b + 1}" if h == 0 else None)
        ax.plot(steps, values[:, b_best, h_best], color="k", lw=2.2,
                label=f"best head by final prefix matching: block {b_best + 1} head {h_best + 1} "
                      f"({values[-1, b_best, h_best]:+.2f})")
        ax.set_ylabel(label)
        _shade(ax, {seed: summary})
        step_axis(ax, steps, label=ax is axes[-1])
    axes[0].axhline(uniform_baseline, color="grey", ls=":", label=f"uniform attention: {uniform_baseline:.3f}")
    axes[1].axhline(0, color="grey", lw=0.8)
    for ax in axes:
        ax.legend(fontsize=6, ncol=2)
    axes[0].set_title(f"seed {seed}: per-head induction scores over training")
    return fig


def make_energy_depth(curves: Mapping[str, Curves], summaries: Mapping[str, dict], n_layer: int, original: str) -> Figure:
    """IE at every depth: each seed's final model, and the original seed before, in and after its window."""
    names = depth_names(n_layer)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, (seed, c) in enumerate(curves.items()):
        ax.plot(x, c.metrics["ie"][-1], "o-", color=f"C{i}", lw=2 if seed == original else 1.2,
                label=f"seed {seed}, final (step {c.steps[-1]})")
    c, w = curves[original], drawn_window(summaries[original])
    marks = [(0, ":", "grey", "initialisation")]
    if summaries[original]["ie_kl"]["unigram_step"] is not None:
        marks.append((summaries[original]["ie_kl"]["unigram_step"], ":", "k", "KL minimum: the unigram phase"))
    if w is not None:
        marks += [(w["start"], "--", "grey", "window start"), (w["end"], "-.", "grey", "window end")]
    for step, style, color, label in marks:
        k = int(np.argmin(np.abs(np.log10(np.maximum(c.steps, 1e-9)) - np.log10(max(step, 1e-9)))))
        ax.plot(x, c.metrics["ie"][k], ls=style, color=color, marker=".",
                label=f"seed {original}, step {c.steps[k]} ({label})")
    ax.axhline(np.e, color="k", lw=0.6, ls=":")
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    ax.text(x[-1], np.e, " e: all states aligned", va="bottom", ha="right", fontsize=7)
    ax.text(x[-1], 1.0, " 1: spread over the sphere", va="bottom", ha="right", fontsize=7)
    ax.set_xticks(x, names)
    ax.set_ylabel("interaction energy")
    ax.set_ylim(0.95, np.e + 0.1)
    ax.set_title("Interaction energy by depth (grey: the original seed's checkpoints nearest to the steps named)")
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    return fig
