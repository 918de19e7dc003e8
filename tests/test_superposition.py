"""Superposition in toy models (method.md §11): the batched model, geometry, regimes, jumps, crossings."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from tinylens.config import resolve_preset
from tinylens.superposition.dynamics import find_jumps, plateau_noise, running_median
from tinylens.superposition.experiments import log_grid
from tinylens.superposition.geometry import (
    dimensions_per_feature,
    feature_dimensionality,
    feature_norms,
    polygon_name,
    regular_polygon,
)
from tinylens.superposition.levels import fraction_coverage, nearest_fraction, parse_fractions
from tinylens.superposition.model import (
    TrainSettings,
    batch_loss,
    expected_loss,
    init_weights,
    loss_and_grads,
    sample_features,
    train,
)
from tinylens.superposition.phase_change import crossings, start_weights
from tinylens.superposition.regimes import (
    DEDICATED,
    NOT_REPRESENTED,
    ROTATED,
    SUPERPOSITION,
    analytic_boundary,
    analytic_regime,
    antipodal_pair_loss,
    boundary_from_cells,
    classify_regime,
    pair_settings,
    unrepresented_losses,
)
from tinylens.superposition.schemas import check_config
from tinylens.superposition.summary import summarize_nonuniform

# --- feature dimensionality ------------------------------------------------------------------------


def test_orthogonal_unit_columns_have_dimensionality_one():
    W = torch.eye(4)[:, :3]  # 3 features in 4 dims, one axis each
    assert torch.allclose(feature_dimensionality(W), torch.ones(3, dtype=torch.float64))
    assert float(dimensions_per_feature(W)) == pytest.approx(4 / 3)


def test_antipodal_pair_has_dimensionality_one_half():
    W = torch.tensor([[1.0, -1.0]])
    assert torch.allclose(feature_dimensionality(W), torch.full((2,), 0.5, dtype=torch.float64))
    assert float(dimensions_per_feature(W)) == pytest.approx(0.5)


def test_regular_pentagon_has_dimensionality_two_fifths_at_any_scale_and_rotation():
    W = regular_polygon(5, start_deg=17.0) * 0.8
    assert torch.allclose(feature_dimensionality(W), torch.full((5,), 0.4, dtype=torch.float64), atol=1e-6)
    # batched: a stack of models, each computed on its own
    stack = torch.stack([W, regular_polygon(3, 5), torch.tensor([[1.0, 0, 0, -1, 0], [0, 1.0, 0, 0, -1]])])
    D = feature_dimensionality(stack)
    assert torch.allclose(D[1, :3], torch.full((3,), 2 / 3, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(D[2], torch.tensor([0.5, 0.5, 0, 0.5, 0.5], dtype=torch.float64))  # zero column: 0


def test_dimensionality_ignores_features_orthogonal_to_a_column():
    W = torch.tensor([[1.0, -1.0, 0.0], [0.0, 0.0, 2.0]])  # a digon and a dedicated, longer column
    assert feature_dimensionality(W).tolist() == pytest.approx([0.5, 0.5, 1.0])


# --- the batched model -----------------------------------------------------------------------------


def test_hand_written_gradients_match_autograd():
    g = torch.Generator().manual_seed(0)
    W, _ = init_weights(4, 3, 7, g)
    b = torch.randn(4, 7, generator=g) * 0.2
    imp = torch.rand(4, 7, generator=g)
    x = sample_features(torch.full((4, 7), 0.4), 33, g)
    W1, b1 = W.clone().requires_grad_(), b.clone().requires_grad_()
    batch_loss(W1, b1, x, imp).sum().backward()
    loss, gW, gb = loss_and_grads(W, b, x, imp)
    assert torch.allclose(loss, batch_loss(W, b, x, imp))
    assert torch.allclose(gW, W1.grad, atol=1e-6) and torch.allclose(gb, b1.grad, atol=1e-6)


def test_features_are_zero_with_probability_one_minus_density_and_uniform_otherwise():
    g = torch.Generator().manual_seed(1)
    x = sample_features(torch.tensor([[0.1, 0.5, 1.0]]), 200_000, g)[0]
    present = (x > 0).float().mean(0)
    assert present.tolist() == pytest.approx([0.1, 0.5, 1.0], abs=0.005)
    values = x[:, 1][x[:, 1] > 0]
    assert float(values.mean()) == pytest.approx(0.5, abs=0.01) and float(values.max()) <= 1.0


def test_models_in_a_stack_train_independently_and_deterministically():
    settings = TrainSettings(steps=200, batch_size=64, lr=1e-2)
    dens = torch.tensor([[0.3] * 5, [0.05] * 5])
    init = init_weights(2, 2, 5, torch.Generator().manual_seed(3))
    a = train(torch.ones(2, 5), dens, 2, settings, seed=7, init=init)
    changed = dens.clone()
    changed[1] = 0.9  # another model in the stack trains on other data...
    b = train(torch.ones(2, 5), changed, 2, settings, seed=7, init=init)
    assert torch.equal(a.W[0], b.W[0]) and torch.equal(a.b[0], b.b[0])  # ...and the first is untouched
    assert not torch.equal(a.W[1], b.W[1])
    again = train(torch.ones(2, 5), dens, 2, settings, seed=7, init=init)
    assert torch.equal(a.W, again.W)
    other = train(torch.ones(2, 5), dens, 2, settings, seed=8, init=init)
    assert not torch.equal(a.W, other.W)


def test_snapshots_are_taken_at_the_requested_steps():
    res = train(torch.ones(1, 4), torch.full((1, 4), 0.5), 2, TrainSettings(10, 8, 1e-2), seed=0,
                snapshot_steps=[0, 5, 10])
    assert res.snapshot_steps == [0, 5, 10] and res.snapshots.shape == (3, 1, 2, 4)
    assert torch.equal(res.snapshots[-1], res.W) and not torch.equal(res.snapshots[0], res.W)
    with pytest.raises(ValueError, match="snapshot steps"):
        train(torch.ones(1, 4), torch.full((1, 4), 0.5), 2, TrainSettings(10, 8, 1e-2), seed=0, snapshot_steps=[11])


def test_bad_settings_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="density"):
        train(torch.ones(1, 3), torch.zeros(1, 3), 2, TrainSettings(5, 4, 1e-3), seed=0)
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainSettings(5, 4, 1e-3, lr_schedule="linear")


def test_expected_loss_matches_closed_forms_and_monte_carlo():
    r, p = 0.7, 0.3
    imp, dens = pair_settings(np.array([r, r]), np.array([p, p]))
    W = torch.tensor([[[1.0, -1.0]], [[1.0, 0.0]]])
    b = torch.tensor([[0.0, 0.0], [0.0, p / 2]])
    got = expected_loss(W, b, imp, dens, points=8192)
    # antipodal pair, no bias: both present (p^2) costs (1 + r) E[min(x1, x2)^2] = (1 + r) / 6
    assert float(got[0]) == pytest.approx(p**2 * (1 + r) / 6, rel=2e-3)
    # feature 1 dropped, its mean p/2 through the bias: r times its variance
    assert float(got[1]) == pytest.approx(r * (p / 3 - p**2 / 4), rel=2e-3)
    x = sample_features(dens, 400_000, torch.Generator().manual_seed(5))
    assert torch.allclose(got, batch_loss(W, b, x, imp), rtol=0.02)


# --- trained behaviour (the checks) --------------------------------------------------------


def test_dense_pair_in_one_dimension_represents_one_feature():
    """S = 0, n = 2, m = 1, equal importance: one feature's worth, no superposition.

    With dense features of equal importance every unit direction of W loses the
    same (the best linear estimate), so which feature (or mix) is kept is up to
    the seed; what is not is that W holds exactly one feature: ||W||_F^2 = 1,
    D* = 1. The same training on sparse features stores both, antipodally
    (D* = 1/2), in the best of the seeds; other seeds can stop in a local
    minimum with both columns on one side, the weaker one shorter.
    """
    seeds = 6
    imp, dens = pair_settings(np.ones(2 * seeds), np.repeat([1.0, 0.05], seeds))
    res = train(imp, dens, 1, TrainSettings(steps=4000, batch_size=256, lr=3e-3), seed=0)
    D = dimensions_per_feature(res.W)
    assert torch.allclose(D[:seeds], torch.ones(seeds, dtype=torch.float64), atol=0.05), D
    assert (classify_regime(res.W[:seeds]) != SUPERPOSITION).all()
    loss = expected_loss(res.W[seeds:], res.b[seeds:], imp[seeds:], dens[seeds:])
    best = int(loss.argmin())
    assert float(D[seeds + best]) == pytest.approx(0.5, abs=0.03)
    assert int(classify_regime(res.W[seeds + best])) == SUPERPOSITION


def test_sparse_five_features_in_two_dimensions_form_a_pentagon():
    seeds = 6
    dens = torch.full((seeds, 5), 0.03)
    res = train(torch.ones_like(dens), dens, 2, TrainSettings(steps=3000, batch_size=256, lr=3e-3), seed=0)
    names = [polygon_name(w) for w in res.W.numpy()]
    assert all(k == 5 for _, k in names), names
    assert sum(name == "pentagon" for name, _ in names) >= seeds - 1, names
    assert torch.allclose(feature_dimensionality(res.W).float().median(), torch.tensor(0.4), atol=0.02)


# --- polygons and regimes on hand-built W ----------------------------------------------------------


@pytest.mark.parametrize(("W", "name", "k"), [
    (regular_polygon(5, start_deg=3.0), "pentagon", 5),
    (regular_polygon(3, 5), "triangle", 3),
    (regular_polygon(4, 5), "two digons", 4),
    (torch.tensor([[1.0, -1.0, 0.1], [0.0, 0.0, 0.1]]), "digon", 2),
    (torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.2]]), "orthogonal pair", 2),
    (torch.tensor([[1.0, -1.0, 0.5, -0.5], [0.0, 0.0, 0.87, -0.87]]), "two digons (skewed)", 4),
    (torch.tensor([[0.0, 0.0], [0.9, 0.0]]), "one feature", 1),
    (torch.zeros(2, 5), "none", 0),
])
def test_polygon_names(W, name, k):
    assert polygon_name(W.numpy()) == (name, k)


def test_a_pentagon_with_one_vertex_pushed_is_deformed():
    W = regular_polygon(5)
    W[:, 0] = torch.tensor([math.cos(math.radians(120)), math.sin(math.radians(120))])
    assert polygon_name(W.numpy()) == ("deformed pentagon", 5)


def test_regime_classifier_on_hand_built_weights():
    W = torch.tensor([
        [[1.0, 0.0]],     # extra feature (the last) not represented
        [[0.1, 1.0]],     # the extra feature has the dimension
        [[1.0, -1.0]],    # antipodal pair: superposition
        [[0.7, -0.7]],    # shares the direction but holds one feature's worth: rotated, not superposition
        [[0.0, 0.2]],     # nothing represented
    ])
    assert classify_regime(W).tolist() == [NOT_REPRESENTED, DEDICATED, SUPERPOSITION, ROTATED, NOT_REPRESENTED]
    W2 = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],    # three features in 2-D, extra dropped
                       [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],    # extra orthogonal to feature 0: dedicated
                       [[1.0, 0.0, -1.0], [0.0, 1.0, 0.0]]])  # extra antipodal to feature 0: superposition
    assert classify_regime(W2).tolist() == [NOT_REPRESENTED, DEDICATED, SUPERPOSITION]
    assert classify_regime(W2, extra=0).tolist() == [DEDICATED, DEDICATED, SUPERPOSITION]


# --- analytic phase diagram ------------------------------------------------------------------------


def test_antipodal_pair_loss_is_the_closed_form_at_the_symmetric_point():
    r = torch.tensor([1.0, 0.5, 3.0], dtype=torch.float64)
    p = torch.tensor([0.1, 0.5, 1.0], dtype=torch.float64)
    got = antipodal_pair_loss(torch.zeros(3, 4, dtype=torch.float64), r, p, quad=256)
    assert got.numpy() == pytest.approx((p**2 * (1 + r) / 6).numpy(), rel=1e-4)
    not_rep, dedicated = unrepresented_losses(np.array([2.0]), np.array([1.0]))
    assert (not_rep[0], dedicated[0]) == pytest.approx((2 / 12, 1 / 12))


def test_analytic_boundary_is_symmetric_in_importance_and_beyond_the_unbiased_bound():
    r = np.array([0.2, 0.5, 1.0, 2.0, 5.0])
    p_star = analytic_boundary(r, (0.01, 1.0), bisections=12, iters=8, quad=48)
    assert p_star[0] == pytest.approx(p_star[-1], rel=0.02) and p_star[1] == pytest.approx(p_star[3], rel=0.02)
    assert p_star[0] < p_star[1] < p_star[2]  # the further r is from 1, the sparser superposition must be
    # optimising biases and norms can only help superposition: beyond where the symmetric unbiased pair ties,
    # p^2 (1 + r) / 6 = r (p/3 - p^2/4) (for r < 1), i.e. p = 4r / (2 + 5r)
    assert p_star[1] > 4 * 0.5 / (2 + 5 * 0.5) - 0.01
    codes = analytic_regime(np.array([0.5, 0.5, 2.0]), np.array([0.01, 0.99, 0.99]), np.full(3, p_star[1]))
    assert codes.tolist() == [SUPERPOSITION, NOT_REPRESENTED, DEDICATED]


def test_trained_boundary_between_cells():
    p = np.array([0.01, 0.1, 1.0])
    assert boundary_from_cells(p, [SUPERPOSITION, SUPERPOSITION, NOT_REPRESENTED]) == pytest.approx(math.sqrt(0.1))
    assert math.isnan(boundary_from_cells(p, [NOT_REPRESENTED] * 3))
    assert math.isnan(boundary_from_cells(p, [SUPERPOSITION] * 3))


# --- fractions, jumps, crossings -------------------------------------------------------------------


def test_fractions_parse_and_the_nearest_is_found():
    fr = parse_fractions(["1/2", "2/5", 1, "3/4"])
    assert fr == [Fraction(1), Fraction(3, 4), Fraction(1, 2), Fraction(2, 5)]
    idx, dist = nearest_fraction(np.array([0.51, 0.41, 0.9]), fr)
    assert [fr[i] for i in idx] == [Fraction(1, 2), Fraction(2, 5), Fraction(1)]
    assert dist == pytest.approx([0.01, 0.01, 0.1])
    with pytest.raises(ValueError, match="'two thirds' is not a fraction"):
        parse_fractions(["two thirds"])


def test_fraction_coverage_merges_overlapping_windows():
    assert fraction_coverage([Fraction(1, 2)], 0.1, 0.0, 1.0) == pytest.approx(0.2)
    assert fraction_coverage([Fraction(2, 5), Fraction(3, 8)], 0.02, 0.0, 1.0) == pytest.approx(0.065)
    assert fraction_coverage([Fraction(1)], 0.05, 0.5, 1.0) == pytest.approx(0.1)


def _staircase(levels, lengths, noise=0.0, seed=0):
    d = np.concatenate([np.full(n, v) for v, n in zip(levels, lengths)])
    return d + np.random.default_rng(seed).normal(0, noise, len(d))


def test_jumps_are_found_where_a_feature_moves_between_plateaus():
    fr = parse_fractions(["1", "3/4", "2/3", "1/2", "2/5", "3/8", "1/3", "0"])
    steps = np.arange(0, 600, 10)
    a = _staircase([0.5, 0.4], [30, 30], noise=0.004)        # digon -> pentagon at step 300
    b = _staircase([2 / 3, 0.6, 0.72, 0.75], [20, 1, 1, 38], noise=0.004)  # triangle -> tetrahedron, quick transit
    c = np.linspace(0.1, 0.9, 60)                              # a slow drift: no plateau, no jump
    e = np.concatenate([np.full(20, 0.5), np.linspace(0.5, 0.4, 20), np.full(20, 0.4)])  # plateaus, slow move
    jumps = find_jumps(steps, np.stack([a, b, c, e], 1), fr, tol=0.02, min_dwell=5, max_transition=6)
    assert [(j.feature, j.step, j.from_fraction, j.to_fraction) for j in jumps] == [
        (1, 210, Fraction(2, 3), Fraction(3, 4)), (0, 300, Fraction(1, 2), Fraction(2, 5))]
    assert jumps[0].left_step == 190 and jumps[0].arrive_step == 220
    slow = find_jumps(steps, e[:, None], fr, tol=0.02, min_dwell=5)  # without the limit the drift counts
    assert [(j.from_fraction, j.to_fraction) for j in slow] == [(Fraction(1, 2), Fraction(2, 5))]


def test_a_jump_must_exceed_the_curves_own_noise():
    """Hand-built curves: a noise-level hop between 3/8 and 2/5 is a move but no jump; a clear 1/2 -> 2/5 is one."""
    fr = parse_fractions(["1", "3/4", "2/3", "1/2", "2/5", "3/8", "1/3", "0"])
    steps = np.arange(0, 2000, 10)
    wiggle = _staircase([3 / 8, 2 / 5, 3 / 8, 2 / 5], [50, 50, 50, 50], noise=0.008, seed=3)  # 0.025 apart, ~3 sigma
    clear = _staircase([0.5, 0.4], [100, 100], noise=0.008, seed=4)  # 0.1 apart, ~12 sigma
    d = np.stack([wiggle, clear], 1)
    args = dict(tol=0.02, min_dwell=5, smooth=5, max_transition=30)
    moves = find_jumps(steps, d, fr, margin=10, keep_small=True, **args)
    assert {j.feature for j in moves if not j.exceeds_noise} == {0} and len(moves) == 4  # three hops and the jump
    jumps = find_jumps(steps, d, fr, margin=10, **args)
    assert [(j.feature, j.step, j.from_fraction, j.to_fraction) for j in jumps] == [
        (1, 1000, Fraction(1, 2), Fraction(2, 5))]
    assert jumps[0].noise == pytest.approx(0.008, rel=0.2)  # the curve's noise, recovered from its plateaus
    assert jumps[0].size_over_noise == pytest.approx(0.1 / jumps[0].noise)
    assert len(find_jumps(steps, d, fr, margin=0, **args)) == 4  # without the margin the hops count as jumps
    assert plateau_noise(np.array([0.5, 0.52, 0.48, 0.4]), np.array([0.5, 0.4]),
                         [(0, 2, 0), (3, 3, 1)]) == pytest.approx(1.4826 * 0.01)  # median |dev| of 0, .02, .02, 0


def test_smoothing_keeps_noise_from_reading_as_jumps():
    fr = parse_fractions(["1/2", "2/5", "3/8", "1/3"])
    steps = np.arange(200)
    d = 3 / 8 + np.random.default_rng(1).normal(0, 0.015, 200)  # optimiser noise around one level
    assert len(find_jumps(steps, d[:, None], fr, tol=0.02, min_dwell=2)) > 0  # noise dips read as visits to 1/3
    assert find_jumps(steps, d[:, None], fr, tol=0.02, min_dwell=2, smooth=9) == []
    assert running_median(np.array([0.0, 1.0, 0.0, 0.0]), 3).tolist() == [0.5, 0.0, 0.0, 0.0]


def test_crossings_interpolate_in_log_space_and_skip_gaps():
    x = np.array([0.01, 0.1, 1.0, 10.0])
    assert crossings(x, np.log10(x) + 0.5) == pytest.approx([10**-0.5])
    assert crossings(x, np.array([-1.0, np.nan, 1.0, 2.0])) == []
    assert crossings(x, np.array([-1.0, 1.0, -1.0, 1.0]), log_x=False) == pytest.approx([0.055, 0.55, 5.5])


def test_starts_favour_their_geometry():
    W, b = start_weights("pentagon", 3)
    assert W.shape == (3, 2, 5) and polygon_name(W[0].numpy()) == ("pentagon", 5)
    W, _ = start_weights("two digons", 2, odd=4)
    assert polygon_name(W[1].numpy()) == ("two digons", 4) and float(feature_norms(W[1])[4]) == 0.0
    with pytest.raises(ValueError, match="unknown start geometry"):
        start_weights("hexagon", 1)


def test_crossing_uses_only_points_where_both_starts_kept_their_geometry():
    rel = np.array([0.05, 0.1, 0.2, 0.4, 0.8])
    models = {
        "start": np.array(["pentagon"] * 5 + ["two digons"] * 5, dtype=object),
        "relative_density": np.tile(rel, 2),
        # pentagon minus digons: +2, +0.5, -0.2, -0.4, then the pentagon collapsed into two digons (equal
        # losses, and a sign change against the -0.4 that is no crossing)
        "loss": np.array([3.0, 2.0, 1.0, 1.0, 1.5, 1.0, 1.5, 1.2, 1.4, 1.0]),
        "kept_start_geometry": np.array([True, True, True, True, False, True, True, True, True, True]),
        "polygon": np.array(["two digons"] * 10, dtype=object),
    }
    out = summarize_nonuniform(models, fixed_sparsity=0.95)
    assert out["n_crossings"] == 1
    assert out["crossing_relative_density"] == pytest.approx(np.exp(np.log(0.1) + 0.5 / 0.7 * np.log(2)))
    assert out["crossing_odd_density"] == pytest.approx(out["crossing_relative_density"] * 0.05)


# --- configuration ---------------------------------------------------------------------------------


def test_the_config_check_names_the_key(config):
    preset = resolve_preset(config, "small")
    assert check_config(preset, config, "presets.small") == []
    spec = preset["superposition"]
    bad = {**spec, "dynamics_sparsity": 0.33, "dimensionality": {**spec["dimensionality"], "hidden": 200}}
    problems = check_config({**preset, "superposition": bad}, config, "presets.small")
    assert any("'presets.small.superposition.dynamics_sparsity' (0.33)" in p for p in problems)
    assert any("'presets.small.superposition.dimensionality.hidden' (200)" in p for p in problems)
    assert log_grid({"min": 0.1, "max": 10, "count": 3}) == pytest.approx([0.1, 1, 10])
    with pytest.raises(ValueError, match="min < max"):
        log_grid({"min": 1, "max": 1, "count": 3})


# --- correlated and anti-correlated feature groups ---------------------------------------------------------


def _groups_stack(seeds=1):
    from tinylens.superposition.correlated import layout, settings_from_config

    sets = settings_from_config({"corr": {"groups": 2, "size": 2, "kind": "correlated", "sparsity": 0.5},
                                 "anti": {"groups": 1, "size": 3, "kind": "anticorrelated", "sparsity": 0.2},
                                 "indep": {"groups": 2, "size": 1, "kind": "independent", "sparsity": 0.7}})
    return sets, layout(sets, seeds)


def test_grouped_features_are_on_together_or_one_at_a_time():
    from tinylens.superposition.correlated import sample_grouped

    sets, lay = _groups_stack()
    assert lay.group_of.shape == (3, 4)  # padded to the largest setting's 4 features
    x = sample_grouped(lay, 40000, torch.Generator().manual_seed(0))
    on = x > 0
    corr, anti, indep = on[0], on[1], on[2]
    assert torch.equal(corr[:, 0], corr[:, 1]) and torch.equal(corr[:, 2], corr[:, 3])  # a group on together
    assert corr[:, 0].float().mean() == pytest.approx(0.5, abs=0.01)
    assert (corr[:, 0] & corr[:, 2]).float().mean() == pytest.approx(0.25, abs=0.01)  # groups independent
    assert int(anti[:, :3].sum(1).max()) == 1  # never two of an anti-correlated group at once
    assert anti[:, :3].any(1).float().mean() == pytest.approx(0.8, abs=0.01)
    assert anti[:, :3].float().mean(0).tolist() == pytest.approx([0.8 / 3] * 3, abs=0.01)
    assert indep[:, :2].float().mean(0).tolist() == pytest.approx([0.3, 0.3], abs=0.01)
    assert (indep[:, 0] & indep[:, 1]).float().mean() == pytest.approx(0.09, abs=0.01)
    assert not on[1, :, 3].any() and not on[2, :, 2:].any()  # padding features are never on
    assert x[0, :, 0][corr[:, 0]].mean() == pytest.approx(0.5, abs=0.01)  # values uniform on [0, 1]


def test_pair_types_relations_and_principal_share_on_hand_built_columns():
    from tinylens.superposition.correlated import Setting, pair_cosines, pair_type, principal_share, relation

    s = Setting("x", 2, 2, "correlated", 0.9)
    assert [pair_type(s, 0, 1), pair_type(s, 0, 2)] == ["same correlated group", "different groups"]
    assert pair_type(Setting("y", 2, 2, "anticorrelated", 0.3), 2, 3) == "same anticorrelated group"
    W = np.array([[1.0, 0.0, -1.0, 0.7], [0.0, 2.0, 0.0, 0.7]])  # [hidden features]
    cos = pair_cosines(W)
    assert cos[0, 1] == pytest.approx(0) and cos[0, 2] == pytest.approx(-1) and cos[0, 3] == pytest.approx(0.5 ** 0.5)
    assert relation([cos[0, 1], cos[0, 2], cos[0, 3], 0.95]).tolist() == ["orthogonal", "antipodal", "other", "aligned"]
    assert principal_share(np.array([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(0.5)  # orthogonal: no collapse
    assert principal_share(np.array([[1.0, 2.0], [1.0, 2.0]])) == pytest.approx(1.0)  # one direction: collapsed


def test_a_sampler_replaces_independent_features_without_changing_training():
    imp, dens = torch.ones(3, 4), torch.full((3, 4), 0.3)
    settings = TrainSettings(steps=30, batch_size=16, lr=1e-2)
    a = train(imp, dens, 2, settings, seed=5)
    b = train(imp, None, 2, settings, seed=5, sampler=lambda n, g: sample_features(dens, n, g))
    assert torch.equal(a.W, b.W) and torch.equal(a.b, b.b)


def test_correlated_claims_and_collapse_are_tested_against_their_controls():
    from tinylens.superposition.summary import summarize_correlated

    def pairs_of(setting, within_type, within_rel, within_n, diff_rel, diff_n):
        rel = within_rel + diff_rel
        return {"setting": [setting] * (within_n + diff_n),
                "pair_type": [within_type] * within_n + ["different groups"] * diff_n,
                "relation": rel, "cos": [{"orthogonal": 0.0, "antipodal": -1.0, "aligned": 1.0}[r] for r in rel]}

    parts = [pairs_of("c", "same correlated group", ["orthogonal"] * 16, 16, ["antipodal"] * 16 + ["orthogonal"] * 16, 32),
             pairs_of("a", "same anticorrelated group", ["antipodal"] * 10 + ["orthogonal"] * 6, 16,
                      ["antipodal"] * 18 + ["orthogonal"] * 14, 32),
             pairs_of("d", "same correlated group", ["aligned"] * 15 + ["orthogonal"], 16, ["orthogonal"] * 32, 32)]
    pairs = {k: sum((p[k] for p in parts), []) for k in parts[0]}
    models = {"setting": ["c", "a", "d"], "kind": ["correlated", "anticorrelated", "correlated"],
              "sparsity": [0.9, 0.3, 0.5], "seed": [0, 0, 0]}
    groups = {"setting": ["c", "c", "d", "d"], "principal_share": [0.5, 0.5, 1.0, 0.98]}
    out = summarize_correlated(models, pairs, groups)
    c, a = out["settings"]["c"], out["settings"]["a"]
    assert c["claim"]["holds"] and c["claim"]["within_group"]["share"] == 1.0  # 16/16 orthogonal against 16/32
    assert c["claim"]["fisher_p"] < 0.001
    assert not a["claim"]["holds"]  # 10/16 antipodal within groups against 18/32: a majority, not above its control
    assert "claim" not in out["settings"]["d"]  # the dense correlated setting is the collapse test, not the claim
    (dense,) = out["collapse"]["denser"]
    assert dense["setting"] == "d" and dense["collapsed"] and dense["aligned_within_group"]["count"] == 15
    assert out["settings"]["d"]["principal_share"]["mean"] == pytest.approx(0.99)


def test_the_jumps_share_of_the_movement_is_tested_against_one_half():
    """Each feature's movement is the path length of its smoothed D_i; a jump carries the distance between its
    plateaus. Features that only jump give a share near 1, features that also drift give less."""
    from tinylens.superposition.summary import findings, movement_shares
    from tinylens.wording import disagreements

    steps = np.arange(40)
    training = {k: [] for k in ("sparsity", "step", "feature", "norm", "dimensionality")}
    jumps = {k: [] for k in ("sparsity", "feature", "from_fraction", "to_fraction", "exceeds_noise")}
    for f in range(30):
        curve = np.where(steps < 20, 0.5, 1.0)  # one jump from 1/2 to 1 ...
        if f >= 10:
            curve = curve + 0.05 * steps  # ... and, for 20 of the 30, a drift of 1.95 besides
        training["sparsity"] += [0.5] * 40
        training["step"] += list(steps)
        training["feature"] += [f] * 40
        training["norm"] += [1.0] * 40
        training["dimensionality"] += list(curve)
        jumps["sparsity"].append(0.5)
        jumps["feature"].append(f)
        jumps["from_fraction"].append("1/2")
        jumps["to_fraction"].append("1")
        jumps["exceeds_noise"].append(True)
    for key, value in (("sparsity", 0.5), ("feature", 0), ("from_fraction", "2/5"), ("to_fraction", "1/2"),
                       ("exceeds_noise", False)):
        jumps[key].append(value)  # a move within noise: counted apart, not as a jump
    got = movement_shares({k: np.asarray(v) for k, v in training.items()}, jumps, smooth=1)
    assert got["share_moves_within_noise"] == pytest.approx(0.1 / 54)
    # net displacement: 10 x 1/2 + 20 x (1/2 + 1.95); the drifting features' paths are monotone, so the same
    assert got["net_displacement"] == pytest.approx(54) and got["jumps_over_net_displacement"] == pytest.approx(15 / 54)
    # 30 jumps of 1/2 over 10 x 1/2 + 20 x (1/2 + 1.95) of path length
    assert got["jumps_share"]["ratio"] == pytest.approx(15 / (5 + 20 * 2.45))
    assert got["jumps_share"]["direction"] == "below" and got["features"] == 30
    doc = {"headline": {"uniform_sparsest_mean_represented": 5, "uniform_sparsest_pentagon_share": 1.0,
                        "crossing_odd_sparsity": None, "crossing_relative_density": None,
                        "share_near_fraction_in_range": 0.9, "chance_share_in_range": 0.3, "jumps_total": 30,
                        "moves_within_noise": 0, "phase_agreement_best_seed": 1.0,
                        "jumps_share_of_movement": got["jumps_share"]},
           "dimensionality": {"jumps": {"movement": got}}}
    text = " ".join(findings({"superposition": doc}))
    assert "the jumps carry 28% of D_i's total movement over training" in text
    assert "learning is not dominated (share 0.28, 95% interval " in text and disagreements(text) == []
