"""One definition of each quantity: known values, and NumPy and torch agree."""

import math
from functools import partial

import numpy as np
import pytest
import torch

from tinylens import measures
from tinylens.measures import describe, standard_error, standard_error_of, wilson_interval


def test_hellinger_known_values():
    assert measures.hellinger(np.array([1.0, 0, 0]), np.array([0, 1.0, 0])) == pytest.approx(1.0)
    assert measures.hellinger(np.array([0.3, 0.7]), np.array([0.3, 0.7])) == pytest.approx(0.0)
    # H^2 = 1 - sum sqrt(p q): p = (1, 0), q = (1/2, 1/2) -> 1 - sqrt(1/2)
    assert measures.hellinger(np.array([1.0, 0]), np.array([0.5, 0.5])) == pytest.approx(math.sqrt(1 - math.sqrt(0.5)))


def test_kl_known_values_and_direction():
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    assert measures.kl_divergence(p, q) == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1))
    assert measures.kl_divergence(q, p) == pytest.approx(0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5))
    assert measures.kl_divergence(np.array([0.2, 0.8, 0.0]), np.array([0.2, 0.8, 0.0])) == 0.0
    assert measures.kl_divergence(np.array([0.5, 0.5]), np.array([1.0, 0.0])) == np.inf
    logits_p, logits_q = np.array([[1.0, 2.0, 3.0]]), np.array([[0.0, -1.0, 5.0]])
    assert measures.kl_from_logits(logits_p, logits_q) == pytest.approx(
        measures.kl_divergence(measures.softmax(logits_p), measures.softmax(logits_q)))


def test_entropy_cosine_unigram():
    assert measures.entropy(np.full(4, 0.25)) == pytest.approx(math.log(4))
    assert measures.entropy(np.array([1.0, 0.0])) == 0.0
    assert measures.cosine(np.array([1.0, 0]), np.array([-3.0, 0])) == pytest.approx(-1.0)
    assert measures.cosine(np.array([1.0, 1.0]), np.array([1.0, 0])) == pytest.approx(math.sqrt(0.5))
    assert measures.cosine(np.zeros(3), np.ones(3)) == 0.0
    np.testing.assert_allclose(measures.cosine_matrix(np.eye(2), np.array([[1.0, 1.0], [0.0, 2.0]])),
                               [[math.sqrt(0.5), 0.0], [math.sqrt(0.5), 1.0]])
    np.testing.assert_allclose(measures.unigram(np.array([0, 0, 2, 1]), 4), [0.5, 0.25, 0.25, 0.0])
    np.testing.assert_allclose(measures.unigram(np.array([0, 0, 2, 1]), 4, pseudocount=1), [3 / 8, 2 / 8, 2 / 8, 1 / 8])
    with pytest.raises(ValueError, match="0..3"):
        measures.unigram(np.array([0, 4]), 4)


@pytest.mark.parametrize("name", ["hellinger", "kl_divergence", "cosine"])
def test_numpy_and_torch_agree(name):
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(7), size=5), rng.dirichlet(np.ones(7), size=5)
    fn = getattr(measures, name)
    np.testing.assert_allclose(fn(torch.from_numpy(a), torch.from_numpy(b)).numpy(), fn(a, b), rtol=1e-12)
    logits = rng.normal(size=(3, 7))
    np.testing.assert_allclose(measures.softmax(torch.from_numpy(logits)).numpy(), measures.softmax(logits))
    np.testing.assert_allclose(measures.entropy(torch.from_numpy(a)).numpy(), measures.entropy(a))


def test_cosine_matrix_is_batched_over_leading_axes():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 6, 4))
    batched = measures.cosine_matrix(a, b)
    assert batched.shape == (3, 5, 6)
    for i in range(3):
        np.testing.assert_allclose(batched[i], measures.cosine_matrix(a[i], b[i]))
        np.testing.assert_allclose(batched[i, 2, 4], measures.cosine(a[i, 2], b[i, 4]))
    np.testing.assert_allclose(measures.cosine_matrix(torch.from_numpy(a), torch.from_numpy(b)).numpy(), batched)
def test_rank_of_one_entry_counts_strictly_larger_entries():
    rank_of = partial(measures.descending_ranks, base=1, ties="shared")
    scores = np.array([[0.1, 0.5, 0.3, 0.5], [4.0, 3.0, 2.0, 1.0]])
    np.testing.assert_array_equal(rank_of(scores, index=np.array([0, 0])), [4, 1])
    np.testing.assert_array_equal(rank_of(scores, index=np.array([1, 3])), [1, 4])  # tie with index 3
    np.testing.assert_array_equal(rank_of(scores, index=np.array([2, 2])), [3, 3])
    ranked = rank_of(torch.from_numpy(scores), index=torch.tensor([1, 1]))
    assert ranked.dtype == torch.int64 and ranked.tolist() == [1, 2]  # the tie counts in the entry's favour
    batch = np.random.default_rng(0).normal(size=(2, 3, 9))
    idx = np.array([[0, 4, 8], [1, 2, 3]])
    expected = [[1 + int((batch[i, j] > batch[i, j, idx[i, j]]).sum()) for j in range(3)] for i in range(2)]
    np.testing.assert_array_equal(rank_of(batch, index=idx), expected)
    np.testing.assert_array_equal(rank_of(torch.from_numpy(batch), index=torch.from_numpy(idx)).numpy(), expected)


@pytest.mark.parametrize("to", [np.asarray, torch.as_tensor])
def test_every_entrys_rank_by_both_tie_rules_and_bases(to):
    scores = np.array([[0.5, 0.9, 0.5, -1.0, 0.9], [3, 2, 1, 0, -1]], dtype=np.float64)
    shared = measures.descending_ranks(to(scores), base=1, ties="shared")
    assert np.asarray(shared).tolist() == [[3, 1, 3, 5, 1], [1, 2, 3, 4, 5]]
    ordinal = measures.descending_ranks(to(scores), base=0, ties="by_position")
    assert np.asarray(ordinal).tolist() == [[2, 0, 3, 4, 1], [0, 1, 2, 3, 4]]
    # many ties (long enough for an unstable sort to reorder them): the earlier entry first
    tied = np.tile([0.5, 0.2], 50)
    expected = [i // 2 if i % 2 == 0 else 50 + i // 2 for i in range(100)]
    assert np.asarray(measures.descending_ranks(to(tied), base=0, ties="by_position")).tolist() == expected
    # every entry's shared rank is the one-entry rank of it
    rng = np.random.default_rng(1).integers(0, 4, size=(6, 11)).astype(np.float64)
    every = np.asarray(measures.descending_ranks(to(rng), base=1, ties="shared"))
    for i in range(11):
        np.testing.assert_array_equal(every[:, i], measures.descending_ranks(rng, base=1, ties="shared",
                                                                             index=np.full(6, i)))
    with pytest.raises(ValueError, match="ties"):
        measures.descending_ranks(scores, base=0, ties="dense")




@pytest.mark.parametrize(("k", "n"), [(0, 10), (8, 10), (37, 40), (500, 1000), (1, 1)])
def test_wilson_interval_matches_scipy(k, n):
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(method="wilson")
    np.testing.assert_allclose(wilson_interval(k, n), (ci.low, ci.high), atol=1e-9)


def test_wilson_interval_of_no_trials_is_none():
    assert wilson_interval(0, 0) is None


def test_standard_error_is_the_sample_std_over_root_n_for_arrays_and_tensors():
    values = np.array([1.0, 2.0, 4.0, 7.0])
    expected = np.std(values, ddof=1) / 2.0  # sqrt(4) = 2
    assert standard_error(values) == pytest.approx(expected, rel=1e-15)
    assert standard_error(torch.tensor(values)) == pytest.approx(expected, rel=1e-15)
    assert standard_error(values.astype(np.float32)) == pytest.approx(expected, rel=1e-6)
    assert math.isnan(standard_error(np.array([3.0])))
    assert standard_error_of(2.0, 4) == 1.0 and standard_error_of(2.0, 0) == 2.0


def test_describe():
    d = describe(np.array([4.0, 1.0, 3.0, 2.0]))
    assert list(d) == ["mean", "std", "min", "max", "q25", "median", "q75", "n"]
    assert d == {"mean": 2.5, "std": pytest.approx(1.118034), "min": 1.0, "max": 4.0,
                 "q25": 1.75, "median": 2.5, "q75": 3.25, "n": 4}
    assert all(isinstance(d[k], float) for k in ("mean", "std", "min", "max", "q25", "median", "q75"))
    assert d["n"] == 4
    assert describe([1 / 3])["mean"] == 0.333333  # rounded to 6 decimals


def test_paired_difference_is_one_t_test_whose_interval_and_p_agree():
    from scipy import stats

    from tinylens.measures import paired_difference

    rng = np.random.default_rng(0)
    b = rng.random(40)
    a = b + 0.02 + 0.05 * rng.normal(size=40)
    out = paired_difference(a, b)
    d = a - b
    ref = stats.ttest_rel(a, b)
    assert out["mean_difference"] == pytest.approx(d.mean(), rel=1e-5) and out["n"] == 40
    assert out["standard_error"] == pytest.approx(d.std(ddof=1) / math.sqrt(40), rel=1e-5)
    assert out["p"] == pytest.approx(ref.pvalue, rel=1e-4) and out["t"] == pytest.approx(ref.statistic, rel=1e-5)
    half = stats.t.ppf(0.975, 39) * d.std(ddof=1) / math.sqrt(40)
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(d.mean() - half, rel=1e-5), pytest.approx(d.mean() + half, rel=1e-5))
    # the interval excludes 0 exactly when p < 0.05, at any effect size
    for shift in np.linspace(-0.04, 0.04, 41):
        o = paired_difference(b + shift + 0.05 * rng.normal(size=40), b)
        assert (o["ci_low"] > 0 or o["ci_high"] < 0) == (o["p"] < 0.05), shift
    same = paired_difference(np.full(5, 0.3), np.full(5, 0.2))  # every difference 0.1: no spread
    assert same["standard_error"] == 0 and same["p"] == 0 and same["t"] is None and same["ci_low"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="at least 2"):
        paired_difference([0.1], [0.2])


# --- tests whose verdict and numbers come from one record ----------------------------------------------------


def test_mean_test_is_the_one_sample_t_test_and_its_interval_agrees_with_its_p():
    from scipy import stats

    from tinylens.measures import mean_test

    rng = np.random.default_rng(0)
    for shift in (0.0, 0.1, 0.25, 0.5):
        values = rng.normal(shift, 1.0, 60)
        got = mean_test(values, null=0.05)
        want = stats.ttest_1samp(values, 0.05)
        assert got["p"] == pytest.approx(want.pvalue) and got["t"] == pytest.approx(want.statistic)
        lo, hi = got["ci95"]
        assert (lo > 0.05 or hi < 0.05) == (got["p"] < 0.05)  # the interval excludes the null exactly when p < 0.05
        assert got["direction"] == ("same" if got["p"] >= 0.05 else "above" if got["mean"] > 0.05 else "below")
    assert mean_test([1.0])["direction"] == "same" and mean_test([1.0])["p"] is None


def test_share_test_is_the_score_test_the_wilson_interval_inverts():
    from tinylens.measures import share_test

    for k in range(35, 66):  # around the edge of the interval for n = 100
        got = share_test(k, 100)
        lo, hi = got["ci95"]
        assert (lo > 0.5 or hi < 0.5) == (got["p"] < 0.05), k
        assert got["z"] == pytest.approx((k / 100 - 0.5) / math.sqrt(0.25 / 100))
    assert share_test(60, 100)["direction"] == "above" and share_test(40, 100)["direction"] == "below"
    assert share_test(0, 0)["direction"] == "same"


def test_ratio_test_bootstraps_a_share_of_a_total_over_units():
    from tinylens.measures import ratio_test

    carried, total = np.full(40, 1.0), np.full(40, 4.0)  # a quarter, on every unit: no spread at all
    got = ratio_test(carried, total, null=0.5)
    assert got["ratio"] == 0.25 and got["ci95"] == [0.25, 0.25] and got["direction"] == "below"
    assert got["p"] == pytest.approx(2 / 2001)  # (0 + 1) / (draws + 1) on the nearer side, twice: never 0
    rng = np.random.default_rng(1)
    noisy = ratio_test(rng.uniform(0, 2, 30), np.full(30, 2.0), null=0.5)  # about a half
    assert noisy["direction"] == "same" and noisy["ci95"][0] < 0.5 < noisy["ci95"][1]
