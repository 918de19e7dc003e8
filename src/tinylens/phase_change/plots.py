"""The phase-change figures: ``make_<figure>`` builds one and returns the Figure (its script saves it).

Steps go on a symmetric-log axis (linear below the first checkpoint, so step 0 stays on the
figure); a run's window is shaded only where its phase change was detected.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from tinylens.dynamics.phases import log_position_derivative
from tinylens.plots import plt, step_axis


def _shade(ax, summary: dict, color: str) -> None:
    if summary["phase_change_detected"]:
        ax.axvspan(summary["window"]["start"], summary["window"]["end"], color=color, alpha=0.15, lw=0)


def make_curves(curves: Mapping[str, dict], heads: Mapping[str, dict], summaries: Mapping[str, dict]) -> Figure:
    """The main runs on one shared log-step axis: losses, ICL scores (+-2 standard errors), the best
    head's prefix-matching and copying scores, the second copy's loss drop; each run's detected
    window shaded in its colour."""
    fig, axes = plt.subplots(4, 1, figsize=(8.5, 12), sharex=True)
    colors = plt.get_cmap("tab10")(np.arange(len(curves)))
    for color, (name, c) in zip(colors, curves.items()):
        s, h, steps = summaries[name], heads[name], c["step"]
        tag = f"{name} ({'detected' if s['phase_change_detected'] else 'not detected'})"
        axes[0].plot(steps, c["mixture_loss"], color=color, lw=1.6, label=f"{tag}: training mixture")
        axes[0].plot(steps, c["val_loss"], color=color, lw=1, ls="--", label=f"{name}: natural text")
        for key, ls, what in (("mixture_icl", "-", "training mixture"), ("icl", "--", "natural text")):
            axes[1].plot(steps, c[key], color=color, ls=ls, lw=1.4, label=f"{name}: {what}")
            axes[1].fill_between(steps, c[key] - 2 * c[f"{key}_se"], c[key] + 2 * c[f"{key}_se"], color=color,
                                 alpha=0.2, lw=0)
        axes[2].plot(steps, h["prefix_matching"], color=color, lw=1.6,
                     label=f"{name}: best head L{s['best_head']['layer']}H{s['best_head']['head']}")
        axes[2].axhline(s["best_head"]["uniform_prefix_matching"], color="grey", ls=":", lw=1)
        axes[3].plot(steps, h["copying"], color=color, lw=1.6, label=f"{name}: copying (OV eigenvalues)")
        axes[3].plot(steps, c["copy_loss_drop"], color=color, lw=1, ls="--",
                     label=f"{name}: 2nd-copy minus 1st-copy loss (nats)")
        for ax in axes:
            _shade(ax, s, color)
    axes[0].set_ylabel("held-out loss (nats)")
    axes[1].set_ylabel("ICL score (nats)\nlate band minus early band")
    axes[1].axhline(0, color="k", lw=0.8)
    axes[2].set_ylabel("prefix matching\n(probes at unseen periods)")
    axes[2].text(0.01, 0.92, "dotted: a uniform head", transform=axes[2].transAxes, fontsize=7, color="grey")
    axes[3].set_ylabel("copying score / loss drop")
    axes[3].axhline(0, color="k", lw=0.8)
    for ax in axes:
        ax.legend(fontsize=6.5, loc="best")
    step_axis(axes[-1], np.concatenate([c["step"] for c in curves.values()]), linscale=0.3)
    fig.suptitle("The induction-head phase change (shaded: detected window)")
    fig.tight_layout()
    return fig


def make_loss_derivative(curves: dict, summary: dict, name: str, width: float) -> Figure:
    """One run: d loss / d ln(token index) at every checkpoint, on the training mixture and on natural
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


def make_controls(curves: Mapping[str, dict], heads: Mapping[str, dict], summaries: Mapping[str, dict]) -> Figure:
    """Every run side by side against training tokens: the best head's prefix matching and the ICL
    score on the training mixture; a marker at each detected window's peak."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), sharex=True)
    colors = plt.get_cmap("tab10")(np.arange(len(curves)) % 10)
    for color, (name, c) in zip(colors, curves.items()):
        s, tokens = summaries[name], c["tokens"]
        st = s["setting"]
        label = (f"{name}: {st['layers']}L d{st['width']}, {st['schedule']} lr, "
                 f"{st['mixture']['repeat_fraction']:.0%} repeated ({'detected' if s['phase_change_detected'] else 'none'})")
        axes[0].plot(tokens, heads[name]["prefix_matching"], color=color, lw=1.5, label=label)
        axes[1].plot(tokens, c["mixture_icl"], color=color, lw=1.5, label=label)
        if s["phase_change_detected"]:
            for ax in axes:
                ax.axvline(s["window"]["peak_tokens"], color=color, ls=":", lw=1.2)
    axes[0].set_ylabel("best head's prefix matching")
    axes[1].set_ylabel("ICL score on the training mixture (nats)")
    axes[1].axhline(0, color="k", lw=0.8)
    for ax in axes:
        ax.set_xscale("symlog", linthresh=float(np.min([c["tokens"][1] for c in curves.values()])), linscale=0.3)
        ax.set_xlim(0, 1.05 * float(np.max([c["tokens"][-1] for c in curves.values()])))
        ax.set_xlabel("training tokens (log); dotted: detected window's peak")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Controls: 1 layer, constant learning rate, repeated fraction (dose), seeds, widths")
    fig.tight_layout()
    return fig


def make_energy_kl(curves: Mapping[str, dict], summaries: Mapping[str, dict]) -> Figure:
    """Seed 000's curves for runs of several widths: interaction energy of the final residual stream
    and KL(model || unigram) against step; the phases found by code in the legend."""
    fig, axes = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    colors = plt.get_cmap("viridis")(np.linspace(0, 0.85, len(curves)))
    for color, (name, c) in zip(colors, curves.items()):
        s = summaries[name]
        found = [i for i in (1, 2, 3) if s["seed_000_phases"][f"phase_{i}"]]
        label = f"{name} (d_model {s['setting']['width']}): phases {found or 'none'}"
        axes[0].plot(c["step"], c["energy"], color=color, lw=1.5, label=label)
        axes[1].plot(c["step"], c["kl_unigram"], color=color, lw=1.5, label=label)
        for ax in axes:
            _shade(ax, s, color)
    axes[0].set_ylabel("interaction energy (final residual stream)")
    axes[1].set_ylabel("KL(model || unigram) (nats)")
    axes[0].legend(fontsize=7)
    step_axis(axes[1], np.concatenate([c["step"] for c in curves.values()]), linscale=0.3)
    fig.tight_layout()
    return fig
