"""This family's figures: ``make_<figure>`` builds one and returns the Figure (its script saves it);
blocks are numbered from 1 here, as in the paper."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from tinylens.core.plots import MODE_TITLES
from tinylens.plots import plt

VARIANT_LABELS = {"drop_sa": "drop attention (x + ffwd)", "drop_ffwd": "drop feed-forward (x + sa)"}
CONTEXT_TITLES = {"full": "full context (ours: edit every position, run on)",
                  "one_token": "one-token continuation (the paper's code)"}
SHOW = {"\n": "\\n", " ": "␣"}


def make_ablation(ablation: Mapping) -> Figure:
    """Mean Hellinger per block for both variants, one panel per context; error bars span the seeds'
    means (min to max); the paper's table as crosses. ``ablation``: the metrics' ablation section."""
    modes = ablation["modes"]
    contexts = [c for c in ("full", "one_token") if any(c in m for m in modes.values())]
    fig, axes = plt.subplots(1, len(contexts), figsize=(6.2 * len(contexts), 4.3), sharey=True, squeeze=False)
    for ax, context in zip(axes[0], contexts):
        for i, (mode, style) in enumerate(zip(modes, ("-", "--"))):
            for j, variant in enumerate(("drop_sa", "drop_ffwd")):
                entry = modes[mode][context][variant]
                mean = np.asarray(entry["mean"])
                blocks = np.arange(1, len(mean) + 1) + (i - 0.5) * 0.08
                err = [mean - np.asarray(entry["seed_min"]), np.asarray(entry["seed_max"]) - mean]
                ax.errorbar(blocks, mean, yerr=err, ls=style, marker="o", ms=4, capsize=3, color=f"C{j}",
                            label=f"{VARIANT_LABELS[variant]}, {mode} prompts")
        for j, variant in enumerate(("drop_sa", "drop_ffwd")):
            paper = ablation["paper"][variant]
            ax.plot([int(b) + 1 for b in paper], list(paper.values()), "x", color=f"C{j}", ms=9, mew=2,
                    label=f"paper, {variant.replace('_', ' ')}" if context == "one_token" else None)
        ax.set(title=CONTEXT_TITLES[context], xlabel="block whose term is dropped",
               xticks=range(1, len(mean) + 1))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[0][0].set_ylabel("mean Hellinger distance to the unmodified model")
    return fig


def make_final_layernorm(scaling: Mapping[str, np.ndarray], noise: Mapping[str, np.ndarray]) -> Figure:
    """Left: the largest deviations when the last block's output is scaled, measured and predicted by
    eps. Right: post-LayerNorm norm ratio against the input cosine, per noise level."""
    fig, (ax_s, ax_n) = plt.subplots(1, 2, figsize=(12.5, 4.4))
    factors = np.unique(scaling["factor"])
    x = np.arange(len(factors))
    tiny = 1e-18  # a zero deviation still shows on the log axis
    bars = [("max_abs_deviation", "measured max |ln_f(cx) - ln_f(x)|"),
            ("eps_predicted_deviation", "predicted by the eps term alone"),
            ("residual_deviation", "measured minus predicted (rounding)"),
            ("hellinger", "max Hellinger of the distributions")]
    for i, (key, label) in enumerate(bars):
        values = [max(float(scaling[key][scaling["factor"] == f].max()), tiny) for f in factors]
        ax_s.bar(x + (i - 1.5) * 0.2, values, 0.2, label=label)
    ax_s.set(yscale="log", xticks=x, xticklabels=[f"c = {f:g}" for f in factors],
             title="Scaling the last block's output by c", ylabel="largest over the evaluation prompts")
    ax_s.legend(fontsize=7)
    ax_s.grid(alpha=0.3, axis="y")
    for i, level in enumerate(np.unique(noise["noise_level"])):
        sel = noise["noise_level"] == level
        ax_n.scatter(noise["input_cosine"][sel], noise["output_norm_ratio"][sel], s=4, alpha=0.4, color=f"C{i}",
                     label=f"|noise| = {level:g} |x|: mean H {noise['hellinger'][sel].mean():.3f}")
    ax_n.axhline(1.0, color="grey", lw=0.8)
    ax_n.set(xlabel="cos(x, x + noise), x = input of ln_f", ylabel="|ln_f(x + noise)| / |ln_f(x)|",
             title="Noise: the output norm follows the direction, not the input norm")
    ax_n.legend(fontsize=7, markerscale=3)
    ax_n.grid(alpha=0.3)
    return fig


def make_ffwd_endpoint(tables: Mapping[str, Mapping[str, np.ndarray]]) -> Figure:
    """Histograms over the evaluation prompts of cos(end, x_7), |end| / |x_7| and H(unembed(end), model) for the
    feed-forward-only endpoint f = x_1 + sum ffwd (filled) and the attention-only one a = x_1 + sum sa (outline),
    one colour per mode."""
    panels = [("cosine", "cos(endpoint, x_7)"), ("norm_ratio", "|endpoint| / |x_7|"),
              ("hellinger", "H(unembedded endpoint, model)")]
    ends = (("", "x_1 + sum ffwd"), ("sa_", "x_1 + sum sa"))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (key, label) in zip(axes, panels):
        every = [np.asarray(c[f"{prefix}{key}"]) for c in tables.values() for prefix, _ in ends]
        bins = np.histogram_bin_edges(np.concatenate(every), bins=40)
        for i, (mode, cols) in enumerate(tables.items()):
            for prefix, name in ends:
                v = np.asarray(cols[f"{prefix}{key}"])
                ax.hist(v, bins=bins, histtype="stepfilled" if not prefix else "step", alpha=0.45 if not prefix else 1.0,
                        lw=1.5, color=f"C{i}", ls="-" if not prefix else "--",
                        label=f"{MODE_TITLES.get(mode, mode)}, {name}: mean {v.mean():.3f}")
        if key == "norm_ratio":
            ax.axvline(1.0, color="grey", ls=":", lw=1)
        ax.set(xlabel=label)
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("prompts")
    return fig


def _draw_path(ax, path: Mapping, colors: Mapping[str, str]) -> None:
    points = np.asarray(path["points"])
    for i, label in enumerate(path["labels"]):
        kind = label.split("_")[0]
        start, end = points[i], points[i + 1]
        ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": colors[kind], "lw": 1.4,
                                                          "shrinkA": 0, "shrinkB": 0})
        if np.linalg.norm(end - start) > 0.04 * np.abs(points).max():
            ax.text(*(start + end) / 2, label, fontsize=6, color=colors[kind])
    ax.plot(*points[-1], "o", color="black", ms=4)
    ax.annotate("", xy=points[-1], xytext=points[0], arrowprops={"arrowstyle": "-|>", "color": "grey", "lw": 1,
                                                                  "ls": "--", "shrinkA": 0, "shrinkB": 0})


def make_vector_sums(paths: Sequence[Mapping]) -> Figure:
    """Per case-study prompt: the full tip-to-tail path and the feed-forward-only path, to scale."""
    colors = {"x": "black", "sa": "C1", "ffwd": "C0"}
    fig, axes = plt.subplots(len(paths), 2, figsize=(11, 4.6 * len(paths)), squeeze=False)
    for (ax_full, ax_ffwd), case in zip(axes, paths):
        _draw_path(ax_full, case["full"], colors)
        _draw_path(ax_ffwd, case["ffwd_only"], colors)
        every = np.vstack([case["full"]["points"], case["ffwd_only"]["points"]])
        lo, hi = every.min(0), every.max(0)
        pad = 0.08 * (hi - lo).max()
        for ax in (ax_full, ax_ffwd):
            ax.set(xlim=(lo[0] - pad, hi[0] + pad), ylim=(lo[1] - pad, hi[1] + pad), aspect="equal")
            ax.grid(alpha=0.3)
        ax_full.set_title(f"{case['prompt']!r}: x_1, sa_1, ffwd_1, ..., ffwd_6 -> x_7 (|x_7| = {case['final_norm']:.2f})",
                          fontsize=9)
        ax_ffwd.set_title(f"feed-forward only: x_1 + sum ffwd (norm {case['ffwd_only_norm']:.2f}); "
                          f"true angle to x_7: {case['endpoint_angle_degrees']:.1f}°", fontsize=9)
    return fig


def make_token_subspaces(stages: Mapping[int, Mapping[str, np.ndarray]], mixtures: Sequence[Mapping],
                         vocab: str, n_layer: int, top: int = 4) -> Figure:
    """Left: sigma_1/sigma_2 per token at each stage ('a' marked). Middle: p(token | its direction at
    the samples' median norm). Right: the distributions of two-token sums at the input of ln_f."""
    fig, (ax_r, ax_p, ax_m) = plt.subplots(1, 3, figsize=(16, 4.6), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    names = [("input of ln_f" if s == n_layer else f"input of block {s + 1}") for s in stages]
    rng = np.random.default_rng(0)
    for i, cols in enumerate(stages.values()):
        ratio = np.asarray(cols["sigma_ratio"], dtype=float)
        finite = np.isfinite(ratio)
        jitter = i + rng.uniform(-0.15, 0.15, len(ratio))
        ax_r.scatter(jitter[finite], ratio[finite], s=8, alpha=0.6, color=f"C{i}")
        a = list(cols["token"]).index("a") if "a" in list(cols["token"]) else None
        if a is not None and finite[a]:
            ax_r.plot(i, ratio[a], "k*", ms=10, label="'a'" if i == 0 else None)
        p_self = np.asarray(cols["self_probability"], dtype=float)
        ax_p.scatter(i + rng.uniform(-0.15, 0.15, len(p_self)), p_self, s=8, alpha=0.6, color=f"C{i}")
        reached = int(np.sum(cols["reached"]))
        ax_p.text(i, -0.08, f"{reached}/{len(p_self)} reached", ha="center", fontsize=7)
    ax_r.axhline(6, color="grey", ls=":", label="paper: sigma_1 > 6 sigma_2 for 'a' (input of ln_f)")
    ax_r.set(xticks=range(len(names)), xticklabels=names, ylabel="sigma_1 / sigma_2 (uncentred)", yscale="log",
             title="How one-dimensional each token's samples are")
    ax_r.legend(fontsize=7)
    ax_p.set(xticks=range(len(names)), xticklabels=names, ylabel="p(token | v_t at the median norm)",
             ylim=(-0.12, 1.02), title="The first singular vector alone")
    for ax in (ax_r, ax_p):
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3)
    end = [m for m in mixtures if int(m["stage"]) == n_layer]
    width = 0.8 / max(len(end), 1)
    for i, m in enumerate(end):
        dist = np.asarray(m["distribution"])
        order = np.argsort(-dist)[:top]
        ax_m.bar(np.arange(top) + i * width, dist[order], width, color=f"C{i}",
                 label=f"v_{SHOW.get(m['token_a'], m['token_a'])} + v_{SHOW.get(m['token_b'], m['token_b'])}")
        for j, t in enumerate(order):
            if dist[t] >= 0.01:  # label the bars one can see
                ax_m.text(j + i * width, dist[t] + 0.01, SHOW.get(vocab[t], vocab[t]), ha="center", fontsize=7)
    ax_m.set(xticks=np.arange(top) + 0.4 - width / 2, xticklabels=[f"#{j + 1}" for j in range(top)],
             ylabel="probability", title="Sums of two tokens' directions (input of ln_f): most likely tokens")
    ax_m.legend(fontsize=7)
    return fig


def make_criterion(criterion: Mapping) -> Figure:
    """Share of prompts meeting the criterion per block, both subspace variants, the chance levels
    and the paper's rates; one panel per mode. ``criterion``: the metrics' criterion section."""
    modes = criterion["comparison"]
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 4.4), sharey=True, squeeze=False)
    for ax, (mode, rows) in zip(axes[0], modes.items()):
        rows = sorted(rows, key=lambda r: r["block"])
        blocks = np.array([r["block"] + 1 for r in rows])  # the metrics count blocks from 0, figures from 1
        for j, variant in enumerate(("end_of_model", "same_stage")):
            have = [r for r in rows if f"{variant}_abs" in r]
            if not have:
                continue
            b = [r["block"] + 1 for r in have]
            ax.plot(b, [r[f"{variant}_abs"] for r in have], "o-", color=f"C{j}", label=f"{variant.replace('_', ' ')}, |cos|")
            ax.plot(b, [r[f"{variant}_signed"] for r in have], "o:", color=f"C{j}", alpha=0.7,
                    label=f"{variant.replace('_', ' ')}, signed cos")
            paper = [(r["block"] + 1, r[f"paper_{variant}"]) for r in rows if r.get(f"paper_{variant}") is not None]
            if paper:
                ax.plot(*zip(*paper), "x", color=f"C{j}", ms=9, mew=2, label=f"paper, {variant.replace('_', ' ')}")
        have = [r for r in rows if "end_of_model_chance_exact" in r]
        ax.plot([r["block"] + 1 for r in have], [r["end_of_model_chance_exact"] for r in have], "s--", color="grey",
                ms=4, label="chance, C(k,n)/C(V,n)")
        ax.errorbar([r["block"] + 1 for r in have], [r["end_of_model_permutation_null_abs"] for r in have],
                    yerr=[r["end_of_model_permutation_null_abs_std"] for r in have], fmt="^", color="black", ms=4,
                    capsize=3, label="permutation null (mean ± std)")
        lo, hi = criterion["paper"]["chance_percent"]
        ax.axhspan(lo, hi, color="grey", alpha=0.15, label="paper's chance (KDE draws)")
        ax.set(title=MODE_TITLES.get(mode, mode), xlabel="block", xticks=blocks, ylim=(0, 100))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[0][0].set_ylabel("prompts meeting the criterion (%)")
    return fig


def make_attention_vs_ffwd(tables: Mapping[str, Mapping[str, np.ndarray]]) -> Figure:
    """Per block, box plots over the evaluation prompts of |ffwd| / |sa| (log scale, 1 dashed),
    cos(ffwd, sa), cos(ffwd, out) and cos(sa, out); one box per mode side by side. ``tables``: the
    block_contributions table's columns per mode."""
    panels = [("norm_ratio", "|ffwd_b| / |sa_b|"), ("cos_ffwd_sa", "cos(ffwd_b, sa_b)"),
              ("cos_ffwd_out", "cos(ffwd_b, block output)"), ("cos_sa_out", "cos(sa_b, block output)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2))
    width = 0.8 / max(len(tables), 1)
    for ax, (key, label) in zip(axes, panels):
        for i, (mode, cols) in enumerate(tables.items()):
            block = np.asarray(cols["block"])
            blocks = np.unique(block)
            values = [np.asarray(cols[key], dtype=np.float64)[block == b] for b in blocks]
            values = [v[np.isfinite(v)] for v in values]
            pos = blocks + 1 + (i - (len(tables) - 1) / 2) * width
            parts = ax.boxplot(values, positions=pos, widths=width * 0.9, showfliers=False, patch_artist=True,
                               manage_ticks=False, medianprops={"color": "black", "lw": 2})
            for box in parts["boxes"]:
                box.set(facecolor=f"C{i}", alpha=0.5)
            ax.plot([], [], "s", color=f"C{i}", alpha=0.5, label=MODE_TITLES.get(mode, mode))
        if key == "norm_ratio":
            ax.set_yscale("log")
            ax.axhline(1.0, color="grey", ls="--", lw=1)
        else:
            ax.axhline(0.0, color="grey", ls="--", lw=1)
        ax.set(xlabel="block", title=label)
        ax.set_xticks(range(1, len(np.unique(np.concatenate([np.asarray(c["block"]) for c in tables.values()]))) + 1))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[0].set_ylabel("over evaluation prompts (box: quartiles, whiskers 1.5 IQR)")
    return fig


def make_robustness(summary: Mapping) -> Figure:
    """Left: each variant's mean Hellinger (approximation vs model) on the evaluation prompts with +-2 standard
    errors, the default highlighted; right: each variant's paired difference from the default with the 95% interval
    of the paired t-test that gives its verdict."""
    variants = summary["variants"]
    names = list(variants)
    default = summary["default"]
    labels = [f"{v['similarity']}, length {v['length']}" for v in variants.values()]
    colors = ["C3" if n == default else "C0" for n in names]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4), layout="constrained")
    y = np.arange(len(names))
    means = [variants[n]["mean_hellinger"] for n in names]
    ses = [variants[n]["standard_error"] or 0.0 for n in names]
    left.barh(y, means, xerr=2 * np.asarray(ses), color=colors, capsize=4)
    left.set(yticks=y, yticklabels=labels, xlabel="mean Hellinger, approximation vs model (+-2 SE)",
             title=f"{variants[default]['n']} held-out prompts (red: the default)")
    left.invert_yaxis()
    others = [n for n in names if n != default]
    diffs = [variants[n]["versus_default"]["mean_difference"] for n in others]
    intervals = np.array([variants[n]["versus_default"]["test"]["ci95"] for n in others]).reshape(-1, 2)
    yo = np.arange(len(others))
    right.errorbar(diffs, yo, xerr=np.abs(intervals - np.asarray(diffs)[:, None]).T, fmt="o", color="C0", capsize=4)
    right.axvline(0.0, color="C3", lw=1.5)
    for i, n in enumerate(others):
        right.annotate(variants[n]["versus_default"]["verdict"], (diffs[i], i), textcoords="offset points",
                       xytext=(0, 8), ha="center", fontsize=8)
    right.set(yticks=yo, yticklabels=[labels[names.index(n)] for n in others], ylim=(len(others) - 0.5, -0.7),
              xlabel="H(variant) - H(default), paired over prompts (95% interval)", title="difference from the default")
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="x")
    return fig
