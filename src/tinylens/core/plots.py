"""The core's figures (method.md §0-6): the loss curves, the Hellinger histogram, the threshold sweep, the
case studies and one prompt's explanation (``tinylens explain``). One function per figure: ``make_<figure>``
builds it from plain data and returns the :class:`~matplotlib.figure.Figure`; the figure's script saves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure


def make_loss_curves(curves: Mapping[int, Mapping[str, np.ndarray]], original_seed: int,
                     unigram_entropy: float) -> Figure:
    """Train (dashed) and validation (solid) loss per seed, with the unigram entropy for scale.

    curves: seed -> {"step", "train_loss", "val_loss"} columns (``loss.csv``).
    """
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for seed, curve in curves.items():
        label = f"seed {seed}" + (" (original)" if seed == original_seed else "")
        (line,) = ax.plot(curve["step"], curve["val_loss"], lw=2 if seed == original_seed else 1.2,
                          label=f"{label}: val {curve['val_loss'][-1]:.3f}")
        ax.plot(curve["step"], curve["train_loss"], ls="--", color=line.get_color(), lw=1)
    ax.axhline(unigram_entropy, color="grey", ls=":", label=f"unigram entropy {unigram_entropy:.3f}")
    ax.set(xlabel="training step", ylabel="cross-entropy (nats/char)",
           title="Loss during training (solid: validation, dashed: train)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig



MODE_TITLES = {"corpus": "corpus prompts (the paper's mode)", "heldout": "held-out prompts (validation text)",
               "paper": "the paper's own prompts (in-sample)"}
HISTOGRAM_BINS = np.linspace(0, 1, 41)


def make_hellinger_histogram(tables: Mapping[str, Mapping[str, np.ndarray]], paper_values: Sequence[str] = ()
                             ) -> Figure:
    """Per-prompt Hellinger distances, approximation vs model, with the alternates overlaid; one panel per mode.

    tables: mode -> columns of the evaluation table, restricted to the evaluation prompts. In the panels of
    the modes in ``paper_values`` the approximation with the paper's hand-tuned values is drawn too (dotted).
    """
    fig = Figure(figsize=(6 * len(tables), 4.2))
    axes = fig.subplots(1, len(tables), sharey=True, squeeze=False)
    for ax, (mode, cols) in zip(axes[0], tables.items()):
        h = cols["hellinger_approx"]
        ax.hist(h, bins=HISTOGRAM_BINS, alpha=0.55, color="C0", label=f"approximation vs model: mean {h.mean():.3f}")
        for i, name in enumerate(sorted(k for k in cols if k.startswith("hellinger_seed"))):
            a = cols[name]
            ax.hist(a, bins=HISTOGRAM_BINS, histtype="step", lw=1.5, color=f"C{i + 1}",
                    label=f"seed {name.removeprefix('hellinger_seed')} vs original: mean {a.mean():.3f}")
        if mode in paper_values:
            pv = cols["hellinger_paper_values"]
            ax.hist(pv, bins=HISTOGRAM_BINS, histtype="step", lw=1.5, ls=":", color="k",
                    label=f"approximation, the paper's values: mean {pv.mean():.3f}")
        ax.axvline(h.mean(), color="C0", ls="--", lw=1)
        ax.set(title=MODE_TITLES.get(mode, mode), xlabel="Hellinger distance to the original model")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("prompts")
    return fig



def make_threshold_sweep(sweeps: Mapping[str, Mapping[str, np.ndarray]], tuned: Mapping[str, dict],
                         paper_thresholds: Sequence[float] | None) -> Figure:
    """Mean Hellinger of each block alone against its threshold; tuned thresholds as dots, the paper's as crosses.

    sweeps: mode -> {"block", "threshold", "mean_hellinger"} columns.
    """
    fig = Figure(figsize=(6 * len(sweeps), 4.2))
    axes = fig.subplots(1, len(sweeps), sharey=True, squeeze=False)
    for ax, (mode, s) in zip(axes[0], sweeps.items()):
        for b in np.unique(s["block"]):
            sel = s["block"] == b
            (line,) = ax.plot(s["threshold"][sel], s["mean_hellinger"][sel], label=f"block {b + 1}")
            t = tuned[mode]["thresholds"][b]
            ax.plot([t], [np.interp(t, s["threshold"][sel], s["mean_hellinger"][sel])], "o", color=line.get_color())
            if paper_thresholds is not None and b < len(paper_thresholds):
                pt = paper_thresholds[b]
                ax.plot([pt], [np.interp(pt, s["threshold"][sel], s["mean_hellinger"][sel])], "x",
                        color=line.get_color(), ms=8)
        ax.set(title=MODE_TITLES.get(mode, mode), xlabel="similarity threshold (one block alone)")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean Hellinger, tuning prompts")
    return fig



SHOWN_CHARACTERS = {"\n": "\\n", " ": "␣"}


def _model_against_approximation(ax, case: dict, vocab, prompt: str, top: int) -> None:
    """Bars of the model's and the tuned approximation's probabilities on the ``top`` tokens likeliest under
    either (one case-study entry: ``model``, ``tuned``)."""
    q, p = np.asarray(case["model"]), np.asarray(case["tuned"]["distribution"])
    order = np.argsort(-(q + p), kind="stable")[:top]
    x = np.arange(len(order))
    ax.bar(x - 0.2, q[order], 0.4, label="model")
    ax.bar(x + 0.2, p[order], 0.4, label="approximation (tuned, all blocks)")
    ax.set_xticks(x, [SHOWN_CHARACTERS.get(vocab[i], vocab[i]) for i in order])
    ax.set_title(f"{prompt!r}: Hellinger {case['tuned']['hellinger']:.3f}", fontsize=10)
    ax.set_ylabel("next-token probability")
    ax.legend(fontsize=7)


def make_case_studies(summary: dict, top: int = 12) -> Figure:
    """Per case-study prompt: model vs approximation on the most likely tokens, and the matching strings."""
    vocab = summary["vocab"]
    cases = summary["case_studies"]
    fig = Figure(figsize=(13, 3.1 * len(cases)))
    axes = fig.subplots(len(cases), 2, squeeze=False, gridspec_kw={"width_ratios": [1.2, 1]})
    for (bar_ax, text_ax), case in zip(axes, cases):
        _model_against_approximation(bar_ax, case, vocab, case["prompt"], top)
        lines = ["block  matches  examples (strings above the tuned threshold)"]
        for b, (n, ex) in enumerate(zip(case["tuned"]["matches"], case["examples"])):
            shown = ", ".join(repr(e)[1:-1] for e in ex[:4])
            lines.append(f"{b + 1:>5}  {n:>7}  {shown}")
        b0 = case["block0_only"]
        lines.append("block 1 only: " + ", ".join(f"t={t}: {v['matches']} strings, H={v['hellinger']:.3f}"
                                                  for t, v in b0.items()))
        text_ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=7)
        text_ax.axis("off")
    fig.tight_layout()
    return fig



def make_explanation(e: dict, top: int = 12) -> Figure:
    """One explained prompt (tinylens.explain): model vs the combined approximation on the most likely tokens,
    and per block the threshold, the matching strings and the block-alone Hellinger."""
    case, vocab = e["case_study"], e["vocab"]
    fig = Figure(figsize=(13, 3.6))
    bar_ax, text_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.2, 1]})
    _model_against_approximation(bar_ax, case, vocab, e["prompt"], top)
    lines = ["block  threshold  matches  H alone  examples"]
    for b in e["blocks"]:
        shown = ", ".join(repr(s)[1:-1] for s in b["examples"][:3])
        lines.append(f"{b['block'] + 1:>5}  {b['threshold']:>9.2f}  {b['matches']:>7}  {b['alone']['hellinger']:>7.3f}"
                     f"  {shown}")
    if e.get("note"):
        lines.append(e["note"])
    text_ax.text(0, 1, "\n".join(lines), va="top", family="monospace", fontsize=7)
    text_ax.axis("off")
    fig.tight_layout()
    return fig
