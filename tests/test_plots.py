"""The figures draw the data they are given: lines, bars, labels and counts, read back from the Figure."""

import subprocess
import sys

import matplotlib.image as mpimg
import numpy as np
import pytest

from tinylens.core.plots import (
    HISTOGRAM_BINS,
    make_case_studies,
    make_hellinger_histogram,
    make_loss_curves,
    make_threshold_sweep,
)
from tinylens.plots import save_figure


def curve(scale):
    step = np.array([0, 100, 200, 300])
    return {"step": step, "train_loss": scale * np.array([4.2, 2.5, 2.1, 2.0]),
            "val_loss": scale * np.array([4.2, 2.6, 2.3, 2.2])}


def test_loss_curves_draw_every_seed_train_and_validation():
    curves = {1337: curve(1.0), 88: curve(1.1)}
    fig = make_loss_curves(curves, original_seed=1337, unigram_entropy=3.3)
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert len(lines) == 2 * 2 + 1  # validation and train per seed, the unigram line
    np.testing.assert_array_equal(lines[0].get_xdata(), [0, 100, 200, 300])
    np.testing.assert_allclose(lines[0].get_ydata(), curves[1337]["val_loss"])
    np.testing.assert_allclose(lines[1].get_ydata(), curves[1337]["train_loss"])
    np.testing.assert_allclose(lines[3].get_ydata(), curves[88]["train_loss"])
    assert lines[1].get_linestyle() == "--" and lines[0].get_linestyle() == "-"
    assert lines[0].get_linewidth() > lines[2].get_linewidth()  # the original stands out
    np.testing.assert_allclose(lines[4].get_ydata(), [3.3, 3.3])
    assert ax.get_xlabel() == "training step" and ax.get_ylabel() == "cross-entropy (nats/char)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["seed 1337 (original): val 2.200", "seed 88: val 2.420", "unigram entropy 3.300"]


def test_loss_curve_png_is_written_atomically(tmp_path):
    out = tmp_path / "loss.png"
    save_figure(make_loss_curves({1: curve(1.0)}, 1, 3.3), out)
    image = mpimg.imread(out)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert [p.name for p in tmp_path.iterdir()] == ["loss.png"]


def test_hellinger_histogram_counts_every_prompt_per_mode():
    rng = np.random.default_rng(0)
    tables = {mode: {"hellinger_approx": rng.uniform(0, 0.6, 50), "hellinger_seed88": rng.uniform(0, 0.3, 50),
                     "hellinger_seed1442": rng.uniform(0, 0.3, 50)} for mode in ("corpus", "heldout")}
    fig = make_hellinger_histogram(tables)
    axes = fig.axes
    assert len(axes) == 2
    for ax, cols in zip(axes, tables.values()):
        bars = ax.patches[: len(HISTOGRAM_BINS) - 1]  # the approximation's bars come first
        assert len(bars) == 40
        heights = np.array([b.get_height() for b in bars])
        np.testing.assert_array_equal(heights, np.histogram(cols["hellinger_approx"], HISTOGRAM_BINS)[0])
        assert heights.sum() == 50
        assert ax.get_xlabel() == "Hellinger distance to the original model"
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[0] == f"approximation vs model: mean {cols['hellinger_approx'].mean():.3f}"
        assert labels[1:] == [f"seed 1442 vs original: mean {cols['hellinger_seed1442'].mean():.3f}",
                              f"seed 88 vs original: mean {cols['hellinger_seed88'].mean():.3f}"]
        # the dashed line marks the approximation's mean
        (mean_line,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert mean_line.get_xdata()[0] == pytest.approx(cols["hellinger_approx"].mean())
    assert axes[0].get_title().startswith("corpus prompts") and axes[1].get_title().startswith("held-out")


def test_threshold_sweep_draws_each_block_and_marks_tuned_and_paper_thresholds():
    edges = np.round(0.70 + 0.01 * np.arange(30), 4)
    blocks = np.repeat(np.arange(2), 30)
    h = np.concatenate([np.abs(edges - 0.8), np.abs(edges - 0.9) + 0.1])
    sweep = {"block": blocks, "threshold": np.tile(edges, 2), "mean_hellinger": h}
    tuned = {"corpus": {"thresholds": [0.8, 0.9]}}
    fig = make_threshold_sweep({"corpus": sweep}, tuned, paper_thresholds=[0.95, 0.75])
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert len(lines) == 2 * 3  # per block: the sweep, the tuned dot, the paper's cross
    np.testing.assert_allclose(lines[0].get_ydata(), h[:30])
    np.testing.assert_allclose(lines[3].get_ydata(), h[30:])
    assert lines[1].get_marker() == "o" and lines[1].get_xdata()[0] == 0.8 and lines[1].get_ydata()[0] == 0.0
    assert lines[2].get_marker() == "x" and lines[2].get_xdata()[0] == 0.95
    assert lines[4].get_xdata()[0] == 0.9 and lines[4].get_ydata()[0] == pytest.approx(0.1)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["block 1", "block 2"]
    assert ax.get_ylabel() == "mean Hellinger, tuning prompts"


def test_case_studies_bars_are_the_models_and_the_approximations_top_tokens():
    vocab = list("abcdefghijklmnop")
    q = np.zeros(16)
    q[[2, 5, 7]] = [0.5, 0.3, 0.2]
    p = np.zeros(16)
    p[[2, 9]] = [0.6, 0.4]
    case = {"prompt": "0123456789", "model": q.tolist(),
            "tuned": {"distribution": p.tolist(), "matches": [3, 0, 1, 2, 5, 8], "hellinger": 0.25},
            "examples": [["xx"], [], ["y"], ["z"], ["w"], ["v"]],
            "block0_only": {"0.95": {"matches": 3, "hellinger": 0.5}}}
    fig = make_case_studies({"vocab": vocab, "case_studies": [case, case]}, top=4)
    bar_ax, text_ax = fig.axes[0], fig.axes[1]
    assert len(fig.axes) == 4
    assert len(bar_ax.patches) == 2 * 4  # model and approximation bars for the top 4 tokens
    assert [t.get_text() for t in bar_ax.get_xticklabels()] == ["c", "j", "f", "h"]  # by q + p
    np.testing.assert_allclose([b.get_height() for b in bar_ax.patches[:4]], [0.5, 0.0, 0.3, 0.2])
    np.testing.assert_allclose([b.get_height() for b in bar_ax.patches[4:]], [0.6, 0.4, 0.0, 0.0])
    assert bar_ax.get_title() == "'0123456789': Hellinger 0.250"
    text = text_ax.texts[0].get_text()
    assert "    1        3  xx" in text and "t=0.95: 3 strings, H=0.500" in text


def test_importing_the_plots_module_chooses_no_backend():
    code = ("import matplotlib; matplotlib.use('svg'); import tinylens.plots; "
            "print(matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "svg"


def test_pyplot_figure_code_still_gets_plt_on_agg(tmp_path):
    code = ("import matplotlib; "
            "from tinylens.plots import plt, save_figure; fig, ax = plt.subplots(); ax.plot([0, 1]); "
            "save_figure(fig, __import__('sys').argv[1]); print(matplotlib.get_backend(), plt.get_fignums())")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f.png")], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["Agg", "[]"]  # closed after saving
    assert mpimg.imread(tmp_path / "f.png").shape[0] > 100


def test_hellinger_histogram_draws_the_papers_values_in_the_paper_mode_panel():
    rng = np.random.default_rng(1)
    cols = {"hellinger_approx": rng.uniform(0, 0.6, 30), "hellinger_paper_values": rng.uniform(0, 0.9, 30),
            "hellinger_seed88": rng.uniform(0, 0.3, 30)}
    fig = make_hellinger_histogram({"corpus": cols, "paper": cols}, paper_values=["paper"])
    corpus, paper = fig.axes
    assert paper.get_title() == "the paper's own prompts (in-sample)"
    labels = [t.get_text() for t in paper.get_legend().get_texts()]
    assert labels[-1] == f"approximation, the paper's values: mean {cols['hellinger_paper_values'].mean():.3f}"
    assert not any("paper's values" in t.get_text() for t in corpus.get_legend().get_texts())
    dotted = paper.patches[-1]  # the step outline of the paper's values, drawn last
    assert dotted.get_linestyle() != paper.patches[-2].get_linestyle() and len(corpus.patches) == len(paper.patches) - 1
    ys = dotted.get_xy()[:, 1]
    assert ys.max() == np.histogram(cols["hellinger_paper_values"], HISTOGRAM_BINS)[0].max()
