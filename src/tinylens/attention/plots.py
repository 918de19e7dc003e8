"""The attention-dynamics figures: ``make_<figure>`` builds one from plain data and returns the
:class:`~matplotlib.figure.Figure` (tests read what is drawn); the figure's script saves it
(:func:`tinylens.plots.save_figure`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from tinylens.measures import standard_error


def depth_labels(n_depths: int) -> list[str]:
    """``emb``, then the block whose output each depth is (1-based)."""
    return ["emb", *(str(d) for d in range(1, n_depths))]


def make_attention_diagonals(columns: Mapping[str, np.ndarray]) -> Figure:
    """Box plot per head of the self-attention weight S_ii over positions i >= 1 and sequences.

    columns: the diagonal table (block, head, position, weight).
    """
    keep = columns["position"] > 0
    block, head, weight = columns["block"][keep], columns["head"][keep], columns["weight"][keep]
    pairs = sorted(set(zip(block.tolist(), head.tolist())))
    data = [weight[(block == b) & (head == h)] for b, h in pairs]
    fig = Figure(figsize=(max(7, 0.38 * len(pairs) + 2), 4.5))
    ax = fig.subplots()
    parts = ax.boxplot(data, positions=np.arange(len(pairs)), widths=0.6, whis=(5, 95), showfliers=False,
                       patch_artist=True, medianprops={"color": "black"})
    for patch, (b, _) in zip(parts["boxes"], pairs):
        patch.set_facecolor(f"C{b % 10}")
        patch.set_alpha(0.6)
    ax.plot(np.arange(len(pairs)), [d.mean() for d in data], "k.", label="mean")
    ax.set_xticks(np.arange(len(pairs)), [f"{b + 1}.{h + 1}" for b, h in pairs], rotation=90, fontsize=7)
    ax.set(xlabel="block.head", ylabel="self-attention weight $S_{ii}$ (= eigenvalue), $i \\geq 1$",
           title="Diagonal of each head's attention matrix (whiskers: 5-95%)", ylim=(-0.02, 1.02))
    for patch in parts["whiskers"]:
        patch.set_alpha(0.7)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return fig



def make_attention_absorption(columns: Mapping[str, np.ndarray]) -> Figure:
    """Mass the backward walk S^k puts on position 0 against k, one panel per block, one line per head.

    columns: the absorption table (block, head, steps, mass_mean, mass_from_last).
    """
    blocks = np.unique(columns["block"])
    ncols = min(3, len(blocks))
    nrows = int(np.ceil(len(blocks) / ncols))
    fig = Figure(figsize=(4.2 * ncols, 3.3 * nrows))
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    for ax, b in zip(axes.flat, blocks):
        for h in np.unique(columns["head"]):
            sel = (columns["block"] == b) & (columns["head"] == h)
            (line,) = ax.plot(columns["steps"][sel], columns["mass_mean"][sel], marker=".", label=f"head {h + 1}")
            ax.plot(columns["steps"][sel], columns["mass_from_last"][sel], ls="--", color=line.get_color(), lw=1)
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_title(f"block {b + 1}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[len(blocks):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("walk length k")
    for ax in axes[:, 0]:
        ax.set_ylabel("mass on position 0")
    fig.suptitle("Absorption of the backward walk $S^k$ at position 0 "
                 "(solid: mean over start positions, dashed: from the last position)", fontsize=10)
    fig.tight_layout()
    return fig



def make_lens_curves(per_depth: list[Mapping[str, float]], vocab_size: int) -> Figure:
    """Logit lens (solid) and tuned lens (dashed) by depth: rank, probability of the next token,
    KL(final || lens) and entropy. per_depth: rows of ``trajectories.depth_summary``."""
    depth = np.array([r["depth"] for r in per_depth])
    panels = [("rank_mean", "mean rank of the next token"), ("prob_mean", "mean probability of the next token"),
              ("kl_mean", "mean KL(final || lens), nats"), ("entropy_mean", "mean entropy of the lens, nats")]
    fig = Figure(figsize=(10, 7))
    axes = fig.subplots(2, 2, sharex=True)
    for ax, (key, label) in zip(axes.flat, panels):
        for prefix, style, name in (("logit", "-o", "logit lens"), ("tuned", "--s", "tuned lens")):
            ax.plot(depth, [r[f"{prefix}_{key}"] for r in per_depth], style, label=name)
        if key == "rank_mean":
            ax.axhline((vocab_size + 1) / 2, color="grey", ls=":", label=f"chance ({(vocab_size + 1) / 2:g})")
        ax.set(ylabel=label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[-1]:
        ax.set_xticks(depth, depth_labels(len(depth)))
        ax.set_xlabel("depth (residual stream after block)")
    fig.suptitle("Depth-wise trajectories of validation positions through the logit and tuned lenses", fontsize=11)
    fig.tight_layout()
    return fig



def make_next_token_cosine(columns: Mapping[str, np.ndarray], vocab_size: int) -> Figure:
    """Cosine of each depth's residual stream with the next token's unembedding and embedding rows
    (median and quartiles), and that cosine's rank among all tokens. columns: the trajectory table."""
    depth = np.unique(columns["depth"])
    fig = Figure(figsize=(11, 4.2))
    (ax_cos, ax_rank) = fig.subplots(1, 2, sharex=True)
    for name, label, color in (("cos_unembed", "unembedding row (lm_head)", "C0"), ("cos_embed", "input embedding row", "C1")):
        values = [columns[name][columns["depth"] == d] for d in depth]
        q1, med, q3 = (np.array([np.quantile(v, q) for v in values]) for q in (0.25, 0.5, 0.75))
        ax_cos.plot(depth, med, "-o", color=color, label=f"{label}: median")
        ax_cos.fill_between(depth, q1, q3, color=color, alpha=0.2)
        ranks = np.array([columns[f"{name}_rank"][columns["depth"] == d].mean() for d in depth])
        ax_rank.plot(depth, ranks, "-o", color=color, label=label)
    ax_cos.axhline(0, color="grey", lw=0.8)
    ax_rank.axhline((vocab_size + 1) / 2, color="grey", ls=":", label=f"chance ({(vocab_size + 1) / 2:g})")
    ax_cos.set(ylabel="cosine with the next token's row (band: quartiles)")
    ax_rank.set(ylabel=f"mean rank of the next token's row among {vocab_size}")
    for ax in (ax_cos, ax_rank):
        ax.set_xticks(depth, depth_labels(len(depth)))
        ax.set_xlabel("depth (residual stream after block)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Does the state approach the next token's embedding? (untied embeddings)", fontsize=11)
    fig.tight_layout()
    return fig



def make_probe_accuracy(columns: Mapping[str, np.ndarray], n_speakers: int) -> Figure:
    """Speaker-probe accuracy and balanced accuracy by depth, with chance. columns: the probe table."""
    classifier = np.asarray(columns["classifier"])
    styles = {"logistic": ("-o", "logistic regression"), "nearest_class_mean": ("-s", "nearest class mean"),
              "shuffled_labels": (":^", "logistic, shuffled labels (band: 2 std)")}
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharex=True)
    for ax, metric, title in ((axes[0], "accuracy", "accuracy (chance: majority speaker)"),
                              (axes[1], "balanced_accuracy", f"balanced accuracy (chance: 1/{n_speakers})")):
        for name, (style, label) in styles.items():
            sel = classifier == name
            (line,) = ax.plot(columns["depth"][sel], columns[metric][sel], style, label=label)
            spread = columns[f"{metric}_std"][sel]
            if spread.any():  # the shuffled-label control: mean +- 2 std over the permutations
                ax.fill_between(columns["depth"][sel], columns[metric][sel] - 2 * spread,
                                columns[metric][sel] + 2 * spread, color=line.get_color(), alpha=0.15)
        sel = classifier == "chance"
        ax.plot(columns["depth"][sel], columns[metric][sel], color="grey", ls="--", label="chance")
        depth = np.unique(columns["depth"])
        ax.set_xticks(depth, depth_labels(len(depth)))
        top = min(1.0, 1.3 * max(np.max(columns[metric] + 2 * columns[f"{metric}_std"]), 0.3))
        ax.set(xlabel="depth (residual stream after block)", ylabel=metric.replace("_", " "), title=title, ylim=(0, top))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Who is speaking? Probes on the passage-averaged residual stream (trained on train text, "
                 "scored on validation text)", fontsize=10)
    fig.tight_layout()
    return fig



def make_attention_hull(columns: Mapping[str, np.ndarray]) -> Figure:
    """Per head (x: block.head, both from 1), the relative potential |v_{t+1} - W v|^2 / |v_{t+1}|^2
    with the head's own attention, shuffled rows and uniform rows: mean over windows, bars 1.96 SE.

    columns: the hull table (block, head, window, <weighting>_potential, ...)."""
    block, head = np.asarray(columns["block"]), np.asarray(columns["head"])
    pairs = sorted(set(zip(block.tolist(), head.tolist())))
    x = np.arange(len(pairs))
    fig = Figure(figsize=(max(6.0, 0.45 * len(pairs) + 2), 4.2))
    ax = fig.subplots()
    styles = {"real": ("C0", "o", "the head's attention"), "shuffled": ("C3", "x", "rows shuffled over visible positions"),
              "uniform": ("grey", "_", "uniform over visible positions")}
    for i, (name, (color, marker, label)) in enumerate(styles.items()):
        v = np.asarray(columns[f"{name}_potential"], dtype=np.float64)
        means, errs = [], []
        for b, h in pairs:
            sel = v[(block == b) & (head == h)]
            means.append(sel.mean())
            errs.append(1.96 * standard_error(sel) if len(sel) > 1 else 0.0)
        ax.errorbar(x + (i - 1) * 0.18, means, yerr=errs, fmt=marker, color=color, label=label, ms=5, capsize=2)
    ax.set_xticks(x, [f"{b + 1}.{h + 1}" for b, h in pairs], rotation=90, fontsize=7)
    ax.set(xlabel="block.head", ylabel="|v_next - weighted mean of values|^2 / |v_next|^2")
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig
