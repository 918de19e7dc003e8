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


#: The figure's rows (method.md §6b): the sources searched over every string, then those over the sample.
CONTROL_ROWS_ALL = ("suffix", "ffwd_out", "null")
CONTROL_ROWS_SAMPLE = ("ffwd_out_sample", "sa_out", "block_input", "block_output", "ffwd_and_sa_out")
#: 95% of a normal mean: the figure's intervals are mean +- this many standard errors.
Z95 = 1.959964


def make_controls(metrics: Mapping, mode: str = "heldout") -> Figure:
    """Mean Hellinger distance from the model by source of next-token counts, with 95% intervals (mean +- 1.96
    standard errors), on ``mode``'s evaluation prompts (``metrics``: ``metrics/controls.json``). Top: the sources
    over every string (the suffix counts, ffwd_out, the null) and each other seed of the model; bottom: the
    vector controls over the sample of strings, with ffwd_out on the same sample. Each row's paired verdict
    against its ffwd_out reference (the dashed line of its group) is written beside it."""
    from tinylens.core.controls import LABELS

    data = metrics["modes"][mode]
    sources = data["sources"]
    seeds = [k for k in sources if k.startswith("seed")]
    n_sample = metrics["settings"]["sample_strings"]
    groups = [("every searched string", [*CONTROL_ROWS_ALL, *seeds], "ffwd_out", "C0"),
              (f"a sample of {n_sample:,} strings", list(CONTROL_ROWS_SAMPLE), "ffwd_out_sample", "C1")]
    rows = [(key, group) for group in groups for key in group[1] if key in sources]
    fig = Figure(figsize=(9, 0.45 * len(rows) + 1.6))
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    for yi, (key, (_, _, _, color)) in zip(y, rows):
        s = sources[key]
        label = LABELS.get(key, f"another seed ({key.removeprefix('seed')})")
        ax.errorbar(s["mean"], yi, xerr=Z95 * s["standard_error"], fmt="o", color=color, capsize=3)
        if "verdict" in s:  # the sample's ffwd_out against ffwd_out over every string
            c = s["versus_ffwd_out"]
            ax.annotate(f"{s['verdict']}: {c['mean_difference']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]",
                        (1.0, yi), xycoords=("axes fraction", "data"), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.text(-0.01, yi, label, transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
    for title, _, reference, color in groups:
        if reference in sources:
            ax.axvline(sources[reference]["mean"], color=color, ls="--", lw=1,
                       label=f"{LABELS[reference]}, {title}: {sources[reference]['mean']:.3f}")
    ax.set_yticks([])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("mean Hellinger distance from the model (95% interval)")
    ax.set_title(f"Sources of next-token counts, {data['n']} evaluation prompts, {MODE_TITLES.get(mode, mode)}\n"
                 "beside each: the paired verdict against the ffwd_out of its group, difference [95% interval]",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    return fig
