"""The phase-change figures: ``make_<figure>`` builds one and returns the Figure (its script saves it).

Steps go on a symmetric-log axis (linear below the first checkpoint, so step 0 stays on the
figure); a seed's window is shaded only where its phase change was detected. Curves are indexed
by run and seed (``curves[run][seed]``, the seeds as the metrics' keys, strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from tinylens.dynamics.phases import log_position_derivative
from tinylens.plots import plt, step_axis


def _shade(ax, summary: dict, color) -> None:
    if summary["phase_change_detected"]:
        ax.axvspan(summary["window"]["start"], summary["window"]["end"], color=color, alpha=0.15, lw=0)


def make_curves(curves: Mapping[str, dict], heads: Mapping[str, dict], run: dict, name: str) -> Figure:
    """The reference run's seeds on one log-step axis: losses (the non-convex stretches marked), ICL scores
    (+-2 standard errors), the best head's prefix matching per probe period, its copying score and the second
    copy's loss drop, the previous-token head's score, their K-composition against random heads; each seed's
    detected window shaded in its colour."""
    fig, axes = plt.subplots(6, 1, figsize=(8.5, 17), sharex=True)
    colors = plt.get_cmap("tab10")(np.arange(len(curves)))
    for color, (seed, c) in zip(colors, curves.items()):
        s, h, steps = run["seeds"][seed], heads[seed], c["step"]
        b = s["best_head"]
        tag = f"seed {seed} ({'detected' if s['phase_change_detected'] else 'not detected'})"
        axes[0].plot(steps, c["mixture_loss"], color=color, lw=1.6, label=f"{tag}: training mixture")
        axes[0].plot(steps, c["val_loss"], color=color, lw=1, ls="--", label=f"seed {seed}: natural text")
        for stretch in s["nonconvex"]["stretches"]:
            at = int(np.argmin(np.abs(steps - stretch["peak"])))
            axes[0].plot(steps[at], c["mixture_loss"][at], "v", color=color, ms=7)
        for key, ls, what in (("mixture_icl", "-", "training mixture"), ("icl", "--", "natural text, band"),
                              ("icl_single", ":", "natural text, single positions")):
            axes[1].plot(steps, c[key], color=color, ls=ls, lw=1.4, label=f"seed {seed}: {what}")
            if key != "icl_single":
                axes[1].fill_between(steps, c[key] - 2 * c[f"{key}_se"], c[key] + 2 * c[f"{key}_se"], color=color,
                                     alpha=0.2, lw=0)
        for p, ls in zip(b["probe_periods"], ("-", "--", ":", "-.")):
            axes[2].plot(steps, h["prefix_matching"][p], color=color, lw=1.4, ls=ls,
                         label=f"seed {seed}: layer {b['layer'] + 1}, head {b['head'] + 1}, period {p}")
            axes[2].axhline(b["uniform_prefix_matching"][str(p)], color="grey", ls=":", lw=1)
        axes[3].plot(steps, h["copying"], color=color, lw=1.6, label=f"seed {seed}: copying (OV eigenvalues)")
        axes[3].plot(steps, c["copy_loss_drop"], color=color, lw=1, ls="--",
                     label=f"seed {seed}: 2nd-copy minus 1st-copy loss (nats)")
        if "previous_token_head" in h:
            p = s["previous_token_head"]
            axes[4].plot(steps, h["previous_token_head"], color=color, lw=1.6,
                         label=f"seed {seed}: layer 1, head {p['head'] + 1}")
            axes[4].axhline(p["uniform"], color="grey", ls=":", lw=1)
        if "k_composition" in h:
            k = h["k_composition"]
            axes[5].plot(steps, k["score"], color=color, lw=1.6, label=f"seed {seed}: K-composition")
            axes[5].fill_between(steps, k["baseline_mean"] - k["baseline_std"], k["baseline_mean"] + k["baseline_std"],
                                 color="grey", alpha=0.15, lw=0)
        for ax in axes:
            _shade(ax, s, color)
    axes[0].set_ylabel("held-out loss (nats)\n(triangles: non-convex stretches)")
    axes[1].set_ylabel("ICL score (nats)\nlate minus early")
    axes[1].axhline(0, color="k", lw=0.8)
    axes[2].set_ylabel("best head's prefix matching\n(alias-free probe periods)")
    axes[2].text(0.01, 0.92, "dotted: a uniform head", transform=axes[2].transAxes, fontsize=7, color="grey")
    axes[3].set_ylabel("copying score / loss drop")
    axes[3].axhline(0, color="k", lw=0.8)
    axes[4].set_ylabel("previous-token score\n(first layer's best)")
    axes[5].set_ylabel("K-composition with\nthe best head")
    axes[5].text(0.01, 0.92, "grey band: random heads, mean +- std", transform=axes[5].transAxes, fontsize=7,
                 color="grey")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5, loc="best")
    step_axis(axes[-1], np.concatenate([c["step"] for c in curves.values()]), linscale=0.3)
    fig.suptitle(f"The induction-head phase change: {name}, every seed (shaded: detected window)")
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return fig


def make_loss_derivative(curves: dict, summary: dict, name: str, width: float) -> Figure:
    """One seed of a run: d loss / d ln(token index) at every checkpoint, on the training mixture and on natural
    text (Olsson et al.'s derivative heatmap), the detected window marked."""
    steps = curves["step"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=True)
    for ax, key, what in ((axes[0], "mixture_loss_by_position", "training mixture"),
                          (axes[1], "loss_by_position", "natural text")):
        loss = np.asarray(curves[key])
        derivative = log_position_derivative(loss, width)
        tokens = np.arange(1, loss.shape[1] + 1)
        limit = float(np.quantile(np.abs(derivative[1:, 1:]), 0.98)) or 1.0
        mesh = ax.pcolormesh(np.concatenate([[0.75], tokens + 0.5]), np.arange(len(steps) + 1) - 0.5, derivative,
                             cmap="RdBu_r", vmin=-limit, vmax=limit, shading="flat")
        fig.colorbar(mesh, ax=ax, label="d loss / d ln(token index) (nats)")
        ax.set_xscale("log")
        ax.set_xlabel("token index in the context (log)")
        ax.set_title(f"{name}, {what}\n(blue: later tokens predicted better)")
        if summary["phase_change_detected"]:
            w = summary["window"]
            rows = np.interp(np.log10([w["start"], w["end"]]), np.log10(steps[1:]), np.arange(1, len(steps)))
            ax.axhspan(*rows, facecolor="none", edgecolor="tab:orange", lw=1.5, ls="--", label="detected window")
            ax.legend(fontsize=7, loc="upper right")
    ticks = np.arange(0, len(steps), max(1, len(steps) // 20))
    axes[0].set_yticks(ticks)
    axes[0].set_yticklabels([str(steps[i]) for i in ticks], fontsize=7)
    axes[0].set_ylabel("checkpoint (training step)")
    fig.tight_layout()
    return fig


def _axis_panel(ax, points: Sequence[dict], xlabel: str, log: bool) -> None:
    """The best head's final score (left axis) and the window's peak in tokens (right axis) against one
    setting, mean +- standard error over seeds (peaks over the detecting seeds)."""
    x = np.array([p["value"] for p in points], dtype=np.float64)
    score = np.array([p["final_prefix_matching"]["mean"] for p in points], dtype=np.float64)
    score_se = np.array([p["final_prefix_matching"]["se"] or 0.0 for p in points], dtype=np.float64)
    ax.errorbar(x, score, yerr=score_se, color="tab:blue", marker="o", capsize=3, label="best head's final score")
    ax.set_ylabel("best head's final prefix matching", color="tab:blue")
    ax.set_xlabel(xlabel)
    if log:
        ax.set_xscale("log", base=2)
    peaks = [(v, p["peak_tokens"]) for v, p in zip(x, points) if p["peak_tokens"]["mean"] is not None]
    twin = ax.twinx()
    if peaks:
        twin.errorbar([v for v, _ in peaks], [t["mean"] for _, t in peaks], yerr=[t["se"] or 0.0 for _, t in peaks],
                      color="tab:red", marker="s", ls="--", capsize=3, label="window's peak (detecting seeds)")
    twin.set_ylabel("window's peak (training tokens)", color="tab:red")
    for v, p in zip(x, points):
        ax.annotate(f"{p['detected_seeds']}/{p['seeds_run']}", (v, 0), xycoords=("data", "axes fraction"),
                    xytext=(0, 3), textcoords="offset points", ha="center", fontsize=7)
    ax.grid(alpha=0.3)


def make_controls(curves: Mapping[str, dict], heads: Mapping[str, dict], runs: Mapping[str, dict],
                  dose: Sequence[dict], width: Sequence[dict]) -> Figure:
    """Every run's seeds against training tokens (the best head's prefix matching averaged over the probe
    periods; the ICL score on the training mixture), and the two axes: the best head's final score and the
    window's peak against the repeated fraction (dose) and against the width, mean +- standard error over
    seeds, the detecting seeds' count at the bottom."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    colors = plt.get_cmap("tab10")(np.arange(len(curves)) % 10)
    for color, (name, seeds) in zip(colors, curves.items()):
        r = runs[name]
        st = r["setting"]
        label = (f"{name}: {st['layers']}L d{st['width']}, {st['schedule']} lr, {st['data']} "
                 f"({r['detected_seeds']} of {r['seeds_run']} detected)")
        for i, (seed, c) in enumerate(seeds.items()):
            s = r["seeds"][seed]
            ls = ("-", "--", ":", "-.")[i % 4]
            axes[0, 0].plot(c["tokens"], heads[name][seed]["prefix_matching_mean"], color=color, lw=1.3, ls=ls,
                            label=label if i == 0 else None)
            axes[0, 1].plot(c["tokens"], c["mixture_icl"], color=color, lw=1.3, ls=ls, label=label if i == 0 else None)
            if s["phase_change_detected"]:
                for ax in axes[0]:
                    ax.axvline(s["window"]["peak_tokens"], color=color, ls=":", lw=1)
    axes[0, 0].set_ylabel("best head's prefix matching (mean over probe periods)")
    axes[0, 1].set_ylabel("ICL score on the training mixture (nats)")
    axes[0, 1].axhline(0, color="k", lw=0.8)
    first = float(np.min([c["tokens"][1] for seeds in curves.values() for c in seeds.values()]))
    last = float(np.max([c["tokens"][-1] for seeds in curves.values() for c in seeds.values()]))
    for ax in axes[0]:
        ax.set_xscale("symlog", linthresh=first, linscale=0.3)
        ax.set_xlim(0, 1.05 * last)
        ax.set_xlabel("training tokens (log); dotted: detected windows' peaks; line style: seed")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=6.5, loc="upper left")
    _axis_panel(axes[1, 0], dose, "share of training windows repeated (dose)", log=False)
    axes[1, 0].set_title("dose: runs differing from the reference only in the repeated fraction", fontsize=9)
    _axis_panel(axes[1, 1], width, "d_model (log 2)", log=True)
    axes[1, 1].set_title("width: runs differing from the reference only in d_model", fontsize=9)
    fig.suptitle("Controls: seeds, 1 layer, constant learning rate, repeated fraction (dose), widths, random tokens")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def make_energy_kl(curves: Mapping[str, dict], summaries: Mapping[str, dict]) -> Figure:
    """Seed 000's curves for runs of several widths (every seed): interaction energy of the final residual
    stream and KL(model || unigram) against step; the phases found by code in the legend."""
    fig, axes = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(curves)))
    for color, (name, seeds) in zip(colors, curves.items()):
        for i, (seed, c) in enumerate(seeds.items()):
            s = summaries[name]["seeds"][seed]
            found = [k for k in (1, 2, 3) if s["seed_000_phases"][f"phase_{k}"]]
            label = f"{name} seed {seed} (d_model {summaries[name]['setting']['width']}): phases {found or 'none'}"
            ls = ("-", "--", ":", "-.")[i % 4]
            axes[0].plot(c["step"], c["energy"], color=color, lw=1.4, ls=ls, label=label)
            axes[1].plot(c["step"], c["kl_unigram"], color=color, lw=1.4, ls=ls, label=label)
            for ax in axes:
                _shade(ax, s, color)
    axes[0].set_ylabel("interaction energy (final residual stream)")
    axes[1].set_ylabel("KL(model || unigram) (nats)")
    axes[0].legend(fontsize=6.5)
    step_axis(axes[1], np.concatenate([c["step"] for seeds in curves.values() for c in seeds.values()]), linscale=0.3)
    fig.tight_layout()
    return fig
