"""Each family's figures from hand-built data: which panels, series, labels and values a ``make_*``
function draws, read back from the Figure it returns (never its pixels)."""

from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest

from tinylens.dynamics.summary import Curves


@pytest.fixture(autouse=True)
def close_figures():
    """Figures made through pyplot stay registered until closed."""
    yield
    plt.close("all")


def legend(ax) -> list[str]:
    found = ax.get_legend()
    return [t.get_text() for t in found.get_texts()] if found else []


def texts(fig) -> str:
    """Every title, axis label, tick label, legend entry and text of a figure, one per line."""
    out = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *legend(ax)]
        out += [t.get_text() for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts)]
    return "\n".join(out)


def line(ax, label):
    (found,) = [x for x in ax.get_lines() if x.get_label() == label]
    return found


# --- supporting analyses ------------------------------------------------------------------------------

def test_ablation_draws_both_variants_per_context_with_the_paper_beside():
    from tinylens.supporting.plots import CONTEXT_TITLES, make_ablation

    entry = {"mean": [0.2, 0.1, 0.05], "seed_min": [0.15, 0.08, 0.04], "seed_max": [0.3, 0.12, 0.07]}
    ablation = {"modes": {"corpus": {c: {"drop_sa": entry, "drop_ffwd": entry} for c in ("full", "one_token")}},
                "paper": {"drop_sa": {"0": 0.11, "2": 0.09}, "drop_ffwd": {"0": 0.7, "2": 0.15}}}
    fig = make_ablation(ablation)
    assert [ax.get_title() for ax in fig.axes] == [CONTEXT_TITLES["full"], CONTEXT_TITLES["one_token"]]
    full, one = fig.axes
    first = full.containers[0].lines[0]  # the data line of the first error bar
    np.testing.assert_allclose(first.get_ydata(), entry["mean"])
    np.testing.assert_allclose(first.get_xdata(), np.array([1, 2, 3]) - 0.04)  # blocks from 1, offset per mode
    assert legend(one) == ["paper, drop sa", "paper, drop ffwd", "drop attention (x + ffwd), corpus prompts",
                           "drop feed-forward (x + sa), corpus prompts"]
    np.testing.assert_allclose(line(one, "paper, drop sa").get_xdata(), [1, 3])  # block "0" is block 1
    assert full.get_ylabel() == "mean Hellinger distance to the unmodified model"


def test_final_layernorm_bars_per_factor_and_noise_clouds():
    from tinylens.supporting.plots import make_final_layernorm

    scaling = {"factor": np.array([0.1, 0.1, 10, 10]), "max_abs_deviation": np.array([1e-3, 2e-3, 5e-4, 0.0]),
               "eps_predicted_deviation": np.full(4, 1e-3), "residual_deviation": np.full(4, 1e-7),
               "hellinger": np.array([0.01, 0.02, 0.0, 0.0])}
    noise = {"noise_level": np.array([0.1, 0.1, 1.0, 1.0]), "input_cosine": np.array([0.99, 0.98, 0.7, 0.6]),
             "output_norm_ratio": np.array([1.0, 1.01, 0.9, 0.95]), "hellinger": np.array([0.01, 0.03, 0.2, 0.4])}
    left, right = make_final_layernorm(scaling, noise).axes
    assert [t.get_text() for t in left.get_xticklabels()] == ["c = 0.1", "c = 10"]
    heights = [b.get_height() for b in left.patches]
    assert len(heights) == 4 * 2  # four quantities, two factors
    np.testing.assert_allclose(heights[:2], [2e-3, 5e-4])  # the largest measured deviation per factor
    assert heights[7] == 1e-18  # a zero still shows on the log axis
    assert legend(right) == ["|noise| = 0.1 |x|: mean H 0.020", "|noise| = 1 |x|: mean H 0.300"]
    np.testing.assert_allclose(right.collections[1].get_offsets(), [[0.7, 0.9], [0.6, 0.95]])


def test_ffwd_endpoint_histograms_each_mode():
    from tinylens.supporting.plots import make_ffwd_endpoint

    tables = {mode: {"cosine": np.array([0.5, 0.7]) + d, "norm_ratio": np.array([0.8, 1.2]),
                     "hellinger": np.array([0.1, 0.3]) + d, "sa_cosine": np.array([0.1, 0.2]),
                     "sa_norm_ratio": np.array([0.5, 0.6]), "sa_hellinger": np.array([0.5, 0.6])}
              for mode, d in (("corpus", 0.0), ("heldout", 0.1))}
    fig = make_ffwd_endpoint(tables)
    assert [ax.get_xlabel() for ax in fig.axes] == ["cos(endpoint, x_7)", "|endpoint| / |x_7|",
                                                    "H(unembedded endpoint, model)"]
    assert legend(fig.axes[0]) == ["corpus prompts (the paper's mode), x_1 + sum ffwd: mean 0.600",
                                   "corpus prompts (the paper's mode), x_1 + sum sa: mean 0.150",
                                   "held-out prompts (validation text), x_1 + sum ffwd: mean 0.700",
                                   "held-out prompts (validation text), x_1 + sum sa: mean 0.150"]
    assert fig.axes[0].get_ylabel() == "prompts"


def test_vector_sums_draws_each_step_of_both_paths():
    from tinylens.supporting.plots import make_vector_sums

    def path(n):
        return {"points": np.cumsum(np.ones((n + 1, 2)), axis=0).tolist(),
                "labels": ["x_1", *(f"ffwd_{b}" for b in range(1, n))]}

    paths = [{"prompt": "thou art a", "final_norm": 3.0, "ffwd_only_norm": 2.5, "endpoint_angle_degrees": 12.0,
              "full": path(4), "ffwd_only": path(2)}]
    full, ffwd = make_vector_sums(paths).axes
    assert full.get_title().startswith("'thou art a'") and "|x_7| = 3.00" in full.get_title()
    assert "norm 2.50" in ffwd.get_title() and "12.0°" in ffwd.get_title()
    arrows = [t for t in full.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == 4 + 1  # every term, and the endpoint from the start
    assert len([t for t in ffwd.texts if getattr(t, "arrow_patch", None) is not None]) == 2 + 1
    assert {t.get_text() for t in full.texts} >= {"x_1", "ffwd_1", "ffwd_3"}  # long enough to be labelled


def test_token_subspaces_per_stage_and_the_two_token_sums():
    from tinylens.supporting.plots import make_token_subspaces

    stage = {"sigma_ratio": np.array([8.0, 2.0, np.inf]), "token": np.array(["a", "b", "c"], dtype=object),
             "self_probability": np.array([0.9, 0.4, 0.1]), "reached": np.array([True, False, True])}
    mixtures = [{"stage": 6, "token_a": "a", "token_b": " ", "distribution": [0.6, 0.3, 0.1]},
                {"stage": 5, "token_a": "a", "token_b": "b", "distribution": [0.2, 0.2, 0.6]}]
    ratios, probabilities, sums = make_token_subspaces({6: stage, 5: stage}, mixtures, "abc", 6, top=2).axes
    assert [t.get_text() for t in ratios.get_xticklabels()] == ["input of ln_f", "input of block 6"]
    assert len(ratios.collections[0].get_offsets()) == 2  # the infinite ratio is left out
    np.testing.assert_allclose(line(ratios, "'a'").get_ydata(), [8.0])
    assert [t.get_text() for t in probabilities.texts] == ["2/3 reached", "2/3 reached"]
    assert legend(sums) == ["v_a + v_␣"]  # only the input of ln_f's pair
    np.testing.assert_allclose([b.get_height() for b in sums.patches], [0.6, 0.3])
    assert [t.get_text() for t in sums.texts] == ["a", "b"]


def test_criterion_draws_the_rates_the_chance_levels_and_the_paper():
    from tinylens.supporting.plots import make_criterion

    rows = [{"block": b, "end_of_model_abs": 40.0 + b, "end_of_model_signed": 30.0 + b,
             "paper_end_of_model": 50.0 + b, "end_of_model_chance_exact": 2.0, "end_of_model_permutation_null_abs": 2.5,
             "end_of_model_permutation_null_abs_std": 1.0} for b in (0, 1)]
    rows[1].update(same_stage_abs=60.0, same_stage_signed=55.0, paper_same_stage=None)
    (ax,) = make_criterion({"comparison": {"corpus": rows}, "paper": {"chance_percent": [16.0, 21.0]}}).axes
    assert ax.get_title() == "corpus prompts (the paper's mode)"
    assert legend(ax) == ["end of model, |cos|", "end of model, signed cos", "paper, end of model",
                          "same stage, |cos|", "same stage, signed cos", "chance, C(k,n)/C(V,n)",
                          "paper's chance (KDE draws)", "permutation null (mean ± std)"]
    np.testing.assert_allclose(line(ax, "end of model, |cos|").get_ydata(), [40.0, 41.0])
    np.testing.assert_allclose(line(ax, "end of model, |cos|").get_xdata(), [1, 2])  # blocks from 1 in figures
    np.testing.assert_allclose(line(ax, "same stage, |cos|").get_xdata(), [2])
    assert ax.get_ylim() == (0, 100)



def test_robustness_bars_per_variant_the_default_in_red_and_the_paired_differences():
    from matplotlib.colors import to_hex

    from tinylens.supporting.plots import make_robustness

    versus = {"mean_difference": 0.03, "standard_error": 0.01, "verdict": "worse", "test": {"ci95": [0.01, 0.05]}}
    summary = {"default": "cosine_len10", "variants": {
        "cosine_len10": {"similarity": "cosine", "length": 10, "mean_hellinger": 0.2, "standard_error": 0.01, "n": 50},
        "euclidean_len10": {"similarity": "euclidean", "length": 10, "mean_hellinger": 0.23, "standard_error": 0.02,
                            "n": 50, "versus_default": versus},
        "cosine_len5": {"similarity": "cosine", "length": 5, "mean_hellinger": 0.19, "standard_error": 0.01, "n": 50,
                        "versus_default": {"mean_difference": -0.01, "standard_error": 0.01, "verdict": "no different",
                                           "test": {"ci95": [-0.03, 0.01]}}}}}
    left, right = make_robustness(summary).axes
    bars = left.patches
    np.testing.assert_allclose([b.get_width() for b in bars], [0.2, 0.23, 0.19])
    assert [to_hex(b.get_facecolor()) for b in bars] == [to_hex("C3"), to_hex("C0"), to_hex("C0")]
    assert [t.get_text() for t in left.get_yticklabels()] == ["cosine, length 10", "euclidean, length 10",
                                                              "cosine, length 5"]
    assert [t.get_text() for t in right.get_yticklabels()] == ["euclidean, length 10", "cosine, length 5"]
    np.testing.assert_allclose(np.asarray(right.containers[0][0].get_xdata(), dtype=float), [0.03, -0.01])
    segments = right.containers[0][2][0].get_segments()  # the error bars: each variant's 95% interval
    np.testing.assert_allclose([[seg[0][0], seg[1][0]] for seg in segments], [[0.01, 0.05], [-0.03, 0.01]])
    assert [t.get_text() for t in right.texts] == ["worse", "no different"]
    assert "50 held-out prompts" in left.get_title()


# --- superposition ------------------------------------------------------------------------------------

def pentagon(n=5, scale=1.0):
    angles = 2 * np.pi * np.arange(n) / n
    return scale * np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)


def test_polygons_one_panel_per_model_seeds_down_sparsity_across():
    from tinylens.superposition.plots import make_polygons

    models = {"sparsity": np.array([0.0, 0.0, 0.9, 0.9]), "seed": np.array([0, 1, 0, 1]),
              "polygon": np.array(["digon", "digon", "pentagon", "pentagon"], dtype=object),
              "n_represented": np.array([2, 2, 5, 5])}
    features = {"sparsity": np.repeat(models["sparsity"], 5), "seed": np.repeat(models["seed"], 5),
                "feature": np.tile(np.arange(5), 4), "w": np.concatenate([pentagon()] * 4)}
    fig = make_polygons(models, features)
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "S = 0\ndigon (2)"
    assert fig.axes[1].get_title() == "S = 0.9\npentagon (5)" and fig.axes[3].get_title() == "pentagon (5)"
    assert [ax.get_ylabel() for ax in fig.axes[::2]] == ["seed 0", "seed 1"]
    arrows = [x for x in fig.axes[1].get_lines() if len(x.get_xdata()) == 2]  # the unit circle has 100 points
    np.testing.assert_allclose([a.get_xydata()[1] for a in arrows], pentagon(), atol=1e-6)


def nonuniform():
    rel = np.array([0.1, 1.0])
    starts = ["pentagon", "two digons", "random"]
    models = {"relative_density": np.tile(rel, 3), "odd_density": np.tile(rel * 0.05, 3),
              "start": np.repeat(np.array(starts, dtype=object), 2), "seed": np.zeros(6, dtype=int),
              "loss": np.array([0.3, 0.2, 0.25, 0.25, 0.4, 0.4]), "kept_start_geometry": np.array([1, 1, 1, 0, 0, 0], bool),
              "polygon": np.array(["pentagon", "pentagon", "two digons", "pentagon", "triangle", "pentagon"], object)}
    features = {"odd_density": np.repeat(models["odd_density"], 5), "start": np.repeat(models["start"], 5),
                "seed": np.zeros(30, dtype=int), "feature": np.tile(np.arange(5), 6),
                "w": np.concatenate([pentagon()] * 6)}
    return models, features


def test_phase_change_rows_per_start_densest_first():
    from tinylens.superposition.plots import make_phase_change

    models, features = nonuniform()
    fig = make_phase_change(models, features)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["odd density x1\npentagon", "odd density x0.1\npentagon"]
    assert [ax.get_ylabel() for ax in fig.axes[::2]] == ["from a pentagon", "from two digons", "random start (best)"]
    odd = [x for x in fig.axes[0].get_lines() if x.get_color() == "crimson"]
    assert len(odd) == 2  # the odd feature's arrow and its tip, in red


def test_loss_crossing_curves_per_start_and_the_crossing():
    from tinylens.superposition.plots import make_loss_crossing

    models, _ = nonuniform()
    top, bottom = make_loss_crossing(models, crossing=0.5, fixed_sparsity=0.95).axes
    np.testing.assert_allclose(line(top, "pentagon (start kept)").get_ydata(), [0.3, 0.2])
    # the two-digon start escaped at the higher density: its curve stops where the geometry was lost
    np.testing.assert_allclose(line(top, "two digons (start kept)").get_ydata(), [0.25, np.nan])
    np.testing.assert_allclose(line(top, "two digons start left its geometry (not on the curve)").get_xydata(),
                               [[1.0, 0.25]])
    assert "random starts" in legend(top)
    np.testing.assert_allclose(bottom.get_lines()[0].get_ydata(), [(0.3 - 0.25) / 0.25])  # where both kept theirs
    assert [x.get_xdata()[0] for x in top.get_lines() if x.get_linestyle() == "--"] == [0.5]
    assert top.get_title() == "Features 0-3 at sparsity 0.95; feature 4's density varied"


def test_dimensionality_points_and_the_fractions():
    from tinylens.superposition.plots import make_dimensionality

    models = {"sparsity": np.array([0.5, 0.0]), "dims_per_feature": np.array([0.4, 0.5])}
    features = {"sparsity": np.array([0.0, 0.0, 0.5]), "norm": np.array([1.0, 0.1, 0.9]),
                "dimensionality": np.array([0.5, 0.0, 0.4])}
    (ax,) = make_dimensionality(models, features, [Fraction(1, 2), Fraction(2, 5)], threshold=0.5).axes
    points = ax.collections[0].get_offsets()  # the represented features only, at 1 / (1 - S) jittered
    np.testing.assert_allclose(points[:, 1], [0.5, 0.4])
    np.testing.assert_allclose(points[:, 0], [1, 2], rtol=0.05)
    np.testing.assert_allclose(line(ax, "D* = m / ||W||_F^2").get_xydata(), [[1, 0.5], [2, 0.4]])
    assert [t.get_text() for t in ax.texts] == ["1/2", "2/5"]


def test_fraction_histogram_counts_represented_features_and_says_the_shares():
    from tinylens.superposition.plots import make_fraction_histogram

    features = {"norm": np.array([1.0, 1.0, 1.0, 0.1]), "dimensionality": np.array([0.5, 0.5, 0.41, 0.9])}
    summary = {"represented_features": 3, "share_near_fraction": 2 / 3, "share_near_fraction_in_range": 0.5,
               "chance_share_in_range": 0.25}
    (ax,) = make_fraction_histogram(features, [Fraction(1, 2), Fraction(1, 3)], 0.02, 0.5, summary).axes
    assert sum(b.get_height() for b in ax.patches if b.get_height() > 0 and b.get_width() < 0.01) == 3
    assert ax.get_title() == ("3 represented features; within 0.02 of a fraction: 67% of all,\n"
                              "50% of those with D_i >= 0.313 (chance: 25%)")


def test_dimensionality_training_one_line_per_represented_feature_and_the_jumps():
    from tinylens.superposition.plots import make_dimensionality_training

    steps = [0, 10, 100]
    training = {"sparsity": np.full(9, 0.6), "step": np.repeat(steps, 3), "feature": np.tile([0, 1, 2], 3),
                "dimensionality": np.array([1, 0, 0.5, 0.5, 0, 0.5, 0.5, 0, 0.4]),
                "norm": np.array([1, 0, 1, 1, 0, 1, 1, 0, 1.0])}
    jumps = {"sparsity": np.array([0.6, 0.6]), "feature": np.array([0, 2]), "step": np.array([10, 100]),
             "exceeds_noise": np.array([True, False])}
    (ax,) = make_dimensionality_training(training, jumps, 0.6, [Fraction(1, 2)], threshold=0.5).axes
    assert len([x for x in ax.get_lines() if len(x.get_xdata()) == 3]) == 2  # features 0 and 2
    np.testing.assert_allclose(line(ax, "1 jumps (levels >= margin x noise apart)").get_xydata(), [[10, 0.5]])
    np.testing.assert_allclose(line(ax, "1 moves within the curve's noise (not jumps)").get_xydata(), [[100, 0.4]])
    assert ax.get_title() == "Feature dimensionality over training (S = 0.6; 2 features represented at the end)"


def test_phase_diagram_cells_the_boundaries_and_the_disagreements():
    from tinylens.superposition.plots import REGIME_COLOURS, make_phase_diagram

    cells = {"importance": np.array([0.5, 0.5, 2.0, 2.0]), "density": np.array([0.1, 1.0, 0.1, 1.0]),
             "trained_regime": np.array(["superposition", "not represented", "superposition", "dedicated dimension"],
                                        dtype=object),
             "analytic_regime": np.array(["superposition", "not represented", "dedicated dimension",
                                          "dedicated dimension"], dtype=object)}
    boundary = {"importance": np.array([0.5, 1.0, 2.0]), "analytic_density": np.array([0.3, 0.4, np.nan]),
                "trained_density": np.array([0.32, np.nan, 0.5])}
    (ax,) = make_phase_diagram(cells, boundary).axes
    grid = ax.collections[0].get_array().reshape(2, 2)
    names = list(REGIME_COLOURS)
    assert grid.tolist() == [[names.index("superposition"), names.index("not represented")],
                             [names.index("superposition"), names.index("dedicated dimension")]]
    np.testing.assert_allclose(line(ax, "trained regime differs from the analytic one").get_xydata(), [[0.1, 2.0]])
    np.testing.assert_allclose(line(ax, "analytic boundary of superposition").get_xydata(), [[0.3, 0.5], [0.4, 1.0]])
    assert [x for x in legend(ax) if x.startswith("trained: ")] == [
        "trained: not represented", "trained: dedicated dimension", "trained: superposition"]


# --- training dynamics --------------------------------------------------------------------------------

def dynamics_curves(offset=0.0, steps=(0, 1, 10, 100)):
    steps = np.array(steps)
    n, depths = len(steps), 8  # embed, 6 blocks, ln_f
    metrics = {"ie": np.linspace(1.5, 2.5, n)[:, None] + np.zeros(depths) + offset,
               "ie_prefix": np.full((n, depths), 2.0), "kl_model_unigram": np.linspace(1.0, 0.2, n) + offset,
               "kl_unigram_model": np.linspace(0.8, 0.3, n), "unigram_direction_kl": np.linspace(1.0, 0.01, n),
               "icl_band": np.linspace(0.0, -0.4, n) + offset, "icl_band_se": np.full(n, 0.02),
               "icl_score": np.linspace(0.1, -0.6, n) + offset, "icl_score_se": np.full(n, 0.08),
               "val_loss": np.linspace(4.0, 2.0, n) + offset, "loss_by_position": np.linspace(4, 2, n)[:, None] - np.log(np.arange(1, 9))[None] * 0.1}
    heads = {name: np.tile(np.linspace(0, 0.5, n)[:, None, None], (1, 6, 2)) for name in
             ("prefix_matching", "copying_eigen", "copying_logit")}
    heads["prefix_matching"][:, 5, 1] += 0.3  # the best head: block 6, head 1
    return Curves(steps, metrics, heads)


def dynamics_summary(detected=True):
    return {"window": {"start": 2.0, "end": 20.0, "peak": 10}, "phase_change_detected": detected,
            "ie_kl": {"ie_critical_points": [{"step": 10, "kind": "max", "value": 2.2}],
                      "kl_critical_points": [{"step": 1, "kind": "min", "value": 0.5}], "unigram_step": 1},
            "loss_bump": {"nonconvex": detected}, "best_head": {"block": 5, "head": 1}}


def test_energy_kl_means_over_seeds_with_each_window_shaded():
    from tinylens.dynamics.plots import make_energy_kl

    curves = {"1": dynamics_curves(0.0), "2": dynamics_curves(0.2)}
    fig = make_energy_kl(curves, {"1": dynamics_summary(), "2": dynamics_summary(False)}, n_layer=6)
    ie, kl, direction = fig.axes
    np.testing.assert_allclose(line(ie, "IE of the token states after ln_f (mean, min-max of seeds)").get_ydata(),
                               np.linspace(1.5, 2.5, 4) + 0.1)
    assert legend(kl)[:2] == ["KL(model || unigram)", "KL(unigram || model)"]
    assert "phase-change window, per seed where detected (1 of 2)" in legend(ie)
    assert len(ie.patches) == 1  # only the seed where a phase change was detected
    none = make_energy_kl(curves, {"1": dynamics_summary(False), "2": dynamics_summary(False)}, n_layer=6).axes[0]
    assert "no phase change detected (0 of 2 seeds): no window drawn" in legend(none) and not none.patches
    markers = [x for x in ie.get_lines() if x.get_marker() == "^"]
    assert [x.get_xdata()[0] for x in markers] == [10, 10]  # each seed's IE maximum
    assert direction.get_yscale() == "log" and direction.get_xlabel().startswith("training step")


def test_icl_score_per_seed_with_its_final_value():
    from tinylens.dynamics.plots import make_icl_score

    curves = {"1": dynamics_curves(0.0), "2": dynamics_curves(0.1, steps=(0, 1, 10, 100, 120))}
    icl, loss = make_icl_score(curves, {"1": dynamics_summary(), "2": dynamics_summary(False)}, (3, 31),
                               ((2, 5), (20, 30)), "1").axes
    assert legend(icl)[:2] == ["seed 1: final (step 100) -0.400 +- 0.020", "seed 2: final (step 120) -0.300 +- 0.020"]
    assert legend(loss)[:2] == ["seed 1; loss non-convex in the window", "seed 2"]
    assert line(icl, legend(icl)[0]).get_linewidth() == 2  # the original stands out
    assert icl.get_ylabel() == ("ICL score (nats): mean loss at tokens 21-31\nminus at tokens 3-6\n"
                                "(dashed: token 32 minus token 4)")
    dashed = [x for x in icl.get_lines() if x.get_linestyle() == "--"]
    np.testing.assert_allclose(dashed[0].get_ydata(), np.linspace(0.1, -0.6, 4))  # the single-position score


def test_loss_by_position_maps_and_the_window_rows():
    from tinylens.dynamics.plots import make_loss_by_position

    curves = dynamics_curves()
    fig = make_loss_by_position(curves, dynamics_summary(), "1", 0.1)
    loss_ax, derivative_ax = fig.axes[:2]
    np.testing.assert_allclose(loss_ax.collections[0].get_array().reshape(4, 8), curves.metrics["loss_by_position"])
    assert [t.get_text() for t in loss_ax.get_yticklabels()] == ["0", "1", "10", "100"]
    assert loss_ax.get_title() == "seed 1: loss per position" and "0.1 decades" in derivative_ax.get_title()
    assert legend(derivative_ax) == ["phase-change window"]
    undetected = make_loss_by_position(curves, dynamics_summary(False), "1", 0.1).axes[1]
    assert not undetected.patches and "phase-change window" not in legend(undetected)  # none where none detected


def test_head_scores_every_head_and_the_best_in_black():
    from tinylens.dynamics.plots import make_head_scores

    fig = make_head_scores(dynamics_curves(), dynamics_summary(), "1", uniform_baseline=0.12)
    prefix = fig.axes[0]
    best = [x for x in prefix.get_lines() if x.get_label().startswith("best head")]
    # the metrics' block 5, head 1 (from 0), as people count them
    assert [x.get_label() for x in best] == ["best head by final prefix matching: block 6 head 2 (+0.80)"]
    np.testing.assert_allclose(best[0].get_ydata(), np.linspace(0, 0.5, 4) + 0.3)
    others = [x for x in prefix.get_lines() if len(x.get_xdata()) == 4 and not x.get_label().startswith("best")]
    assert len(others) == 6 * 2 - 1  # every other head of every block
    assert "uniform attention: 0.120" in legend(prefix)
    assert [ax.get_ylabel() for ax in fig.axes] == ["prefix-matching score", "copying score (OV eigenvalues)",
                                                   "copying score (direct logits)"]


def test_energy_depth_final_models_and_the_originals_checkpoints():
    from tinylens.dynamics.plots import make_energy_depth

    curves = {"1": dynamics_curves(0.0), "2": dynamics_curves(0.2)}
    (ax,) = make_energy_depth(curves, {"1": dynamics_summary(), "2": dynamics_summary()}, 6, "1").axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["embed", *(f"block {b}" for b in range(1, 7)), "ln_f"]
    assert legend(ax) == ["seed 1, final (step 100)", "seed 2, final (step 100)",
                          "seed 1, step 0 (initialisation)", "seed 1, step 1 (KL minimum: the unigram phase)",
                          "seed 1, step 1 (window start)", "seed 1, step 10 (window end)"]
    np.testing.assert_allclose(line(ax, "seed 2, final (step 100)").get_ydata(), np.full(8, 2.7))
    (ax,) = make_energy_depth(curves, {"1": dynamics_summary(False), "2": dynamics_summary()}, 6, "1").axes
    assert not any("window" in label for label in legend(ax))  # the original seed has no window to mark


# --- composition (circuits) ---------------------------------------------------------------------------

def scores_frame(seed=1, n_layer=2, n_head=2):
    rows = [{"seed": seed, "step": 9, "layernorm": ln, "basis": basis, "kind": kind, "layer_a": la, "head_a": ha,
             "layer_b": lb, "head_b": hb, "score": 0.2 + 0.1 * ha + (0.3 if kind == "K" else 0.0),
             "baseline_mean": 0.2, "baseline_std": 0.05}
            for ln in ("ignored", "folded") for basis in ("residual", "token") for kind in "QKV"
            for la in range(n_layer) for lb in range(la + 1, n_layer) for ha in range(n_head) for hb in range(n_head)]
    return pl.DataFrame(rows)


def test_composition_heatmaps_one_grid_per_kind_and_variant():
    from tinylens.circuits.plots import make_composition_heatmaps

    fig = make_composition_heatmaps(scores_frame(), n_layer=2, n_head=2)
    grids = [ax for ax in fig.axes if ax.images]
    assert len(grids) == 3 * 4
    k_residual = grids[4]  # row K, column residual/ignored
    assert k_residual.get_title() == "K-comp., residual basis, LN ignored\nbaseline 0.200"
    grid = k_residual.images[0].get_array()
    np.testing.assert_allclose(grid[0:2, 2:4], [[0.3, 0.3], [0.4, 0.4]])  # head a of layer 0 -> heads of layer 1
    assert np.ma.getmaskarray(grid[2:4, 0:2]).all()  # a later head never writes to an earlier one: no value
    assert grids[0].get_ylabel() == "earlier head A (layer.head)" and grids[-1].get_xlabel() == "later head B (layer.head)"
    assert [t.get_text() for t in grids[0].get_yticklabels()][:2] == ["1.1", "1.2"]  # layers and heads from 1


def test_a_pair_of_the_metrics_is_labelled_from_1():
    from tinylens.circuits.plots import people_pair
    from tinylens.circuits.schemas import pair_label

    assert people_pair(pair_label(0, 1, 2, 3)) == "1.2 -> 3.4"


def symmetry_digest(names=("permutation", "cond1000")):
    return {name: {"condition_number": 1000.0 if name.startswith("cond") else 1.0,
                   "kendall_tau": {"Q": 1.0, "K": 0.5, "V": 0.25}, "max_rank_change": {"Q": 0, "K": 3, "V": 7},
                   "token_max_abs_score_change": 1e-16, "layernorm_free_max_logit_change": 2e-15,
                   "real_fold_max_logit_change": 3e-15, "real_fold_eps0_max_logit_change": 4e-15,
                   "real_untouched_max_logit_change": 1.5, "real_model_survives": name == "permutation",
                   "real_model_survives_without_eps": True} for name in names}


def test_composition_symmetry_scatter_per_transform():
    from tinylens.circuits.plots import make_composition_symmetry

    table = pl.DataFrame([{"transform": t, "basis": b, "kind": k, "layer_a": 0, "head_a": 0, "layer_b": 1, "head_b": 0,
                           "score_before": 0.5, "score_after": 0.5 if b == "token" else 0.7}
                          for t in ("permutation", "cond1000") for b in ("residual", "token") for k in "QKV"])
    fig = make_composition_symmetry(table, symmetry_digest())
    drawn = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in drawn] == ["permutation\nresidual tau Q 1.00 K 0.50 V 0.25",
                                                "invertible, cond 1000\nresidual tau Q 1.00 K 0.50 V 0.25"]
    assert legend(drawn[0]) == ["residual Q", "residual K", "residual V", "token (all)"]
    np.testing.assert_allclose(drawn[0].collections[1].get_offsets(), [[0.5, 0.7]])  # residual K moves
    np.testing.assert_allclose(drawn[0].collections[3].get_offsets(), [[0.5, 0.5] for _ in range(3)])


def test_composition_kendall_tau_table_row_per_transform():
    from tinylens.circuits.plots import make_composition_kendall_tau

    (ax,) = make_composition_kendall_tau(symmetry_digest()).axes
    cells = {key: cell.get_text().get_text() for key, cell in ax.tables[0].get_celld().items()}
    assert cells[(0, 0)] == "T" and cells[(0, 2)] == "tau Q"
    assert [cells[(r, 0)] for r in (1, 2)] == ["permutation", "invertible, cond 1000"]
    assert [cells[(1, c)] for c in (1, 2, 3, 4, 5)] == ["1", "1.000", "0.500", "0.250", "0/3/7"]
    assert [cells[(r, 11)] for r in (1, 2)] == ["yes", "up to eps"]


def test_composition_across_seeds_original_first_and_its_agreement():
    from tinylens.circuits.plots import make_composition_across_seeds

    scores = pl.concat([scores_frame(seed=s) for s in (5, 3)])
    entry = {"alternates": {"5": {"kendall_tau_layer_pairs": 0.5, "shared_strongest": 1}}}
    across = {f"{b}/ignored": {k: entry for k in "QKV"} for b in ("residual", "token")}
    fig = make_composition_across_seeds(scores, original=3, n_layer=2, across=across)
    grids = [ax for ax in fig.axes if ax.images]
    assert len(grids) == 2 * 3 * 2  # bases x kinds, seeds
    assert [ax.get_title() for ax in grids[:2]] == ["seed 3: Q, residual\noriginal",
                                                    "seed 5: Q, residual\ntau 0.50, shared 1"]
    np.testing.assert_allclose(grids[2].images[0].get_array()[0, 1], 0.4)  # K: the largest excess over heads


def test_correlated_columns_per_setting_and_seed_and_the_pair_cosines_by_type():
    from tinylens.superposition.plots import make_correlated

    models = {"setting": np.array(["c", "c", "a", "a"], object), "kind": np.array(["correlated"] * 2 + ["anticorrelated"] * 2, object),
              "sparsity": np.array([0.9, 0.9, 0.3, 0.3]), "seed": np.array([0, 1, 0, 1])}
    w = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=float)
    features = {"setting": np.repeat(models["setting"], 4), "seed": np.repeat(models["seed"], 4),
                "feature": np.tile(np.arange(4), 4), "group": np.tile([0, 0, 1, 1], 4), "w": np.concatenate([w] * 4)}
    pairs = {"setting": np.array(["c", "c", "a"], object), "pair_type": np.array(
                 ["same correlated group", "different groups", "same anticorrelated group"], object),
             "cos": np.array([0.0, -1.0, -1.0])}
    fig = make_correlated(models, features, pairs)
    assert len(fig.axes) == 6  # two settings x (two seeds + the cosine panel)
    assert fig.axes[0].get_ylabel() == "c\ncorrelated, S = 0.9" and fig.axes[0].get_title() == "seed 0"
    arrows = [x for x in fig.axes[0].get_lines() if len(x.get_xdata()) == 2]
    assert [a.get_color() for a in arrows] == ["C0", "C0", "C3", "C3"]  # one colour per group
    np.testing.assert_allclose(arrows[2].get_xydata(), [[0, 0], [-1, 0]])
    np.testing.assert_allclose(line(fig.axes[2], "same correlated group").get_xdata(), [0.0])
    np.testing.assert_allclose(line(fig.axes[2], "different groups").get_xdata(), [-1.0])
    np.testing.assert_allclose(line(fig.axes[5], "same anticorrelated group").get_xdata(), [-1.0])


def test_attention_vs_ffwd_draws_a_box_per_block_and_mode():
    from tinylens.supporting.plots import make_attention_vs_ffwd

    block = np.repeat(np.arange(3), 4).astype(np.int8)
    ratio = np.tile([1.5, 2.0, 3.0, np.inf], 3)
    tables = {mode: {"block": block, "norm_ratio": ratio * (1 + d), "cos_ffwd_sa": np.full(12, -0.2 + d),
                     "cos_ffwd_out": np.full(12, 0.8), "cos_sa_out": np.full(12, 0.1)}
              for mode, d in (("corpus", 0.0), ("heldout", 0.5))}
    fig = make_attention_vs_ffwd(tables)
    assert [ax.get_title() for ax in fig.axes] == ["|ffwd_b| / |sa_b|", "cos(ffwd_b, sa_b)",
                                                    "cos(ffwd_b, block output)", "cos(sa_b, block output)"]
    ratio_ax = fig.axes[0]
    assert ratio_ax.get_yscale() == "log"
    assert len(ratio_ax.patches) == 3 * 2  # a box per block and mode
    medians = [line.get_ydata()[0] for line in ratio_ax.lines if line.get_linewidth() == 2]
    assert medians == [2.0] * 3 + [3.0] * 3  # the finite ratios' medians, corpus then held-out
    assert legend(ratio_ax) == ["corpus prompts (the paper's mode)", "held-out prompts (validation text)"]


def test_attention_hull_draws_each_weighting_per_head():
    from tinylens.attention.plots import make_attention_hull

    block = np.repeat([0, 0, 1, 1], 3).astype(np.int8)
    head = np.tile(np.repeat([0, 1], 3), 2).astype(np.int8)
    cols = {"block": block, "head": head, "real_potential": np.tile([0.1, 0.2, 0.3], 4),
            "shuffled_potential": np.full(12, 0.9), "uniform_potential": np.full(12, 1.0)}
    ax = make_attention_hull(cols).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1.1", "1.2", "2.1", "2.2"]
    assert legend(ax) == ["the head's attention", "rows shuffled over visible positions", "uniform over visible positions"]
    real = ax.containers[0]  # errorbar containers in drawing order
    np.testing.assert_allclose(np.asarray(real.lines[0].get_ydata(), dtype=float), [0.2] * 4)
