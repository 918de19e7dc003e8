import numpy as np
import pytest
import torch

from tinylens.core.approx import approximate, hellinger, single_block_sweep, softmax, tune
from tinylens.core.search import cumulative


def test_hellinger_of_a_distribution_with_itself_is_zero():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(65), size=10)
    np.testing.assert_allclose(hellinger(p, p), 0.0, atol=1e-12)


def test_hellinger_of_disjoint_supports_is_one():
    p = np.array([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    q = np.array([[0.0, 0.0, 0.3, 0.7], [0.0, 0.2, 0.2, 0.6]])
    np.testing.assert_allclose(hellinger(p, q), [1.0, 1.0], rtol=0, atol=1e-12)


def test_hellinger_is_symmetric_and_in_unit_interval():
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(8), size=50), rng.dirichlet(np.full(8, 0.3), size=50)
    h = hellinger(p, q)
    assert h.shape == (50,)
    np.testing.assert_allclose(h, hellinger(q, p), rtol=0, atol=1e-15)
    assert ((h > 0) & (h < 1)).all()


def test_hellinger_known_values():
    # sqrt: (0.6, 0.8) vs (0.8, 0.6) -> 0.5 * (0.04 + 0.04) = 0.04 -> 0.2
    assert hellinger(np.array([0.36, 0.64]), np.array([0.64, 0.36])) == pytest.approx(0.2, abs=1e-12)
    # (1, 0) vs (1/2, 1/2): 0.5 * ((1 - sqrt(1/2))^2 + 1/2) = 1 - sqrt(2)/2
    assert hellinger(np.array([1.0, 0.0]), np.array([0.5, 0.5])) == pytest.approx(np.sqrt(1 - np.sqrt(2) / 2))


def test_softmax_rows_are_distributions():
    logits = np.array([[0.0, 0.0], [1000.0, 0.0], [np.log(3.0), 0.0]], dtype=np.float32)
    p = softmax(logits)
    np.testing.assert_allclose(p, [[0.5, 0.5], [1.0, 0.0], [0.75, 0.25]], atol=1e-7)


# above[prompt block threshold vocab]: 3 prompts, 2 blocks, 3 thresholds, vocab 3
ABOVE = np.zeros((3, 2, 3, 3), dtype=np.int64)
ABOVE[0, 0] = [[9, 9, 9], [4, 0, 2], [1, 0, 1]]  # prompt 0, block 0, thresholds 0..2
ABOVE[0, 1] = [[5, 5, 5], [0, 3, 1], [0, 1, 0]]
ABOVE[1, 0] = [[2, 0, 0], [0, 0, 0], [0, 0, 0]]  # prompt 1 only matches block 0 at threshold 0
ABOVE[1, 1] = [[0, 0, 4], [0, 0, 2], [0, 0, 0]]
ABOVE[2, 0] = [[1, 1, 0], [0, 0, 0], [0, 0, 0]]  # prompt 2 has nothing above the higher thresholds


def test_approximate_picks_each_blocks_threshold_and_weights_the_blocks():
    p, empty = approximate(ABOVE, np.array([2, 1]), np.array([1.0, 0.5]))
    # prompt 0: [1, 0, 1] + 0.5 * [0, 3, 1] = [1, 1.5, 1.5] -> / 4
    np.testing.assert_allclose(p[0], [0.25, 0.375, 0.375])
    # prompt 1: block 0 at threshold 2 is empty; 0.5 * [0, 0, 2] -> [0, 0, 1]
    np.testing.assert_allclose(p[1], [0.0, 0.0, 1.0])
    # prompt 2: no match in any block -> uniform, flagged
    np.testing.assert_allclose(p[2], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_array_equal(empty, [False, False, True])


def test_approximate_other_thresholds_and_zero_weight():
    p, empty = approximate(ABOVE, np.array([0, 0]), np.array([0.0, 2.0]))
    np.testing.assert_allclose(p[0], [1 / 3, 1 / 3, 1 / 3])  # block 1 alone: [5, 5, 5]
    np.testing.assert_allclose(p[1], [0.0, 0.0, 1.0])  # block 0's [2, 0, 0] has weight 0
    np.testing.assert_array_equal(empty, [False, False, True])  # prompt 2 matched only block 0
    p, empty = approximate(ABOVE, np.array([0, 2]), np.array([1.0, 1.0]))
    np.testing.assert_allclose(p[1], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(p[2], [0.5, 0.5, 0.0])
    assert not empty.any()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def _planted(seed: int = 0, n_prompts: int = 60, n_blocks: int = 3, n_thresholds: int = 5, vocab: int = 8):
    """Cumulative counts of random binned counts; q = the normalised counts of block 1 at threshold 2."""
    rng = np.random.default_rng(seed)
    binned = rng.poisson(2.0, size=(n_prompts, n_blocks, n_thresholds, vocab)) * (
        rng.random((n_prompts, n_blocks, n_thresholds, vocab)) < 0.5)
    above = cumulative(binned, axis=2)
    above[:, 1, 2, 0] += 1  # no empty row at the planted threshold
    above[:, 1, :2, 0] += 1  # (keep it cumulative)
    target = above[:, 1, 2].astype(np.float64)
    q = target / target.sum(axis=1, keepdims=True)
    return above, q


@pytest.fixture
def one_thread():
    """The weight fit is hundreds of tiny autograd steps: intra-op threads only add overhead
    (on a 2-core machine the einsum backward is ~50x slower with 2 threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_tune_finds_the_planted_threshold_and_block(one_thread):
    above, q = _planted()
    tuned = tune(above, q, init_thresholds=np.zeros(3, dtype=np.int64), rounds=3, progress=False)
    assert tuned.mean_hellinger < 0.01
    assert tuned.thresholds[1] == 2
    assert tuned.weights.shape == (3,)
    assert tuned.weights.sum() == pytest.approx(1.0)
    assert tuned.weights[1] > 0.9 and tuned.weights.argmax() == 1
    # the reported score is the mean Hellinger of the returned thresholds and weights
    p, _ = approximate(above, tuned.thresholds, tuned.weights)
    assert tuned.mean_hellinger == pytest.approx(hellinger(p, q).mean(), abs=1e-12)


def test_single_block_sweep_has_its_minimum_at_the_planted_threshold():
    above, q = _planted()
    sweep = single_block_sweep(above, q)
    assert sweep.shape == (3, 5)
    assert sweep[1].argmin() == 2 and sweep[1, 2] < 1e-12
    assert sweep.min(axis=1)[[0, 2]].min() > 0.1  # the noise blocks are far off
    # each entry is the mean Hellinger of that block alone at that threshold
    p, _ = approximate(above, np.array([0, 0, 3]), np.array([0.0, 0.0, 1.0]))
    assert sweep[2, 3] == pytest.approx(hellinger(p, q).mean())


# --- one definition: combine; the evaluation and tuning report on hand-built data ---

from tinylens.core.approx import (  # noqa: E402
    combine,
    evaluate,
    grid_index,
    in_train_text,
    paper_setting,
    summary_for_prompts,
    tuning_report,
)
from tinylens.core.search import threshold_edges, write_summary  # noqa: E402
from tinylens.core.summary import evaluation_summary  # noqa: E402


def test_combine_numpy_and_torch_agree_and_flag_empty_prompts():
    per_block = np.array([[[1, 0, 1], [0, 3, 1]], [[0, 0, 0], [0, 0, 0]]], dtype=np.int64)  # [2 prompts 2 blocks 3]
    p, empty = combine(per_block, np.array([1.0, 0.5]))
    np.testing.assert_allclose(p[0], [1 / 4, 1.5 / 4, 1.5 / 4])
    np.testing.assert_allclose(p[1], [1 / 3] * 3)
    np.testing.assert_array_equal(empty, [False, True])
    pt, et = combine(torch.from_numpy(per_block), torch.tensor([1.0, 0.5]))
    np.testing.assert_allclose(pt.numpy(), p)
    np.testing.assert_array_equal(et.numpy(), empty)


def test_smoothed_hellinger_has_finite_gradients_where_probabilities_are_zero():
    p = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64, requires_grad=True)
    q = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    hellinger(p, q, eps=1e-12).sum().backward()
    assert torch.isfinite(p.grad).all()
    assert float(hellinger(p.detach(), q)) == 0.0  # eps = 0: the exact value


def test_grid_index_finds_edges_and_refuses_values_off_the_grid():
    edges = threshold_edges(0.70, 0.01, 30)
    np.testing.assert_array_equal(grid_index([0.95, 0.94, 0.85, 0.76, 0.81, 0.89], edges), [25, 24, 15, 6, 11, 19])
    assert grid_index([0.7, 0.99], edges).tolist() == [0, 29]
    with pytest.raises(ValueError, match=r"thresholds \[0\.955, 1\.0\] are not edges of the threshold grid "
                                         r"\(0\.7, 0\.71, \.\.\., 0\.99\)"):
        grid_index([0.955, 0.8, 1.0], edges)


def test_paper_setting_only_for_the_papers_block_count():
    edges = threshold_edges(0.70, 0.01, 30)
    baseline = {"thresholds": [0.95, 0.94], "weights": [0.5, 2.0]}
    th, w = paper_setting(baseline, edges, 2)
    assert th.tolist() == [25, 24] and w.tolist() == [0.5, 2.0]
    assert paper_setting(baseline, edges, 3) is None


def test_evaluate_by_hand():
    q = np.array([[0.25, 0.375, 0.375], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    above_matches = ABOVE.sum(axis=-1)  # any per-(prompt, block, threshold) counts
    q_alt = {7: np.array([[0.25, 0.375, 0.375], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])}
    out = evaluate(ABOVE, above_matches, q, q_alt, (np.array([2, 1]), np.array([1.0, 0.5])),
                   (np.array([0, 0]), np.array([0.0, 2.0])))
    # the tuned setting reproduces prompts 0 and 1 exactly (test_approximate_picks...); prompt 2 is uniform
    np.testing.assert_allclose(out["hellinger_approx"][:2], 0.0, atol=1e-12)
    assert out["hellinger_approx"][2] == pytest.approx(hellinger(np.full(3, 1 / 3), q[2]))
    np.testing.assert_array_equal(out["no_match"], [False, False, True])
    np.testing.assert_array_equal(out["matches"], [[2, 4], [0, 2], [0, 0]])
    # paper setting: block 1 alone at threshold 0 -> prompt 0 uniform ([5, 5, 5])
    assert out["hellinger_paper_values"][0] == pytest.approx(hellinger(np.full(3, 1 / 3), q[0]))
    np.testing.assert_allclose(out["hellinger_seed7"], [0.0, 1.0, 0.0], atol=1e-12)
    nan = evaluate(ABOVE, above_matches, q, {}, (np.array([2, 1]), np.array([1.0, 0.5])), None)
    assert np.isnan(nan["hellinger_paper_values"]).all() and "hellinger_seed7" not in nan


def test_evaluation_summary_splits_by_train_occurrence_on_eval_prompts_only():
    columns = {"hellinger_approx": np.array([0.9, 0.1, 0.2, 0.3, 0.5]),
               "hellinger_paper_values": np.array([0.9, 0.2, 0.2, 0.4, 0.6]),
               "hellinger_seed88": np.array([0.9, 0.1, 0.1, 0.1, 0.1]),
               "no_match": np.array([True, False, False, False, True])}
    splits = ["tune", "eval", "eval", "eval", "eval"]
    in_train = np.array([True, True, False, True, False])
    s = evaluation_summary(columns, splits, in_train, [88], {"thresholds": [0.9], "weights": [1.0]}, "heldout")
    assert s["approximation"]["n"] == 4 and s["approximation"]["mean"] == pytest.approx(0.275)
    assert s["no_match_prompts"] == 1
    v = s["verbatim_in_train"]
    assert v["share"] == 0.5
    assert v["approximation_in_train"]["mean"] == pytest.approx(0.2) and v["approximation_in_train"]["n"] == 2
    assert v["approximation_not_in_train"]["mean"] == pytest.approx(0.35)
    assert s["paper_values"]["mean"] == pytest.approx(0.35)
    assert s["alternates"]["88"]["mean"] == pytest.approx(0.1)


def test_in_train_text_looks_prompts_up_by_string():
    assert in_train_text(["b", "a"], ["a", "b", "c"], np.array([True, False, True])).tolist() == [False, True]
    with pytest.raises(ValueError, match="not in the string table"):
        in_train_text(["z"], ["a"], np.array([True]))


def test_tuning_report_tunes_on_tuning_prompts_and_reports_both_splits(one_thread):
    above, q = _planted(n_prompts=40)
    edges = threshold_edges(0.70, 0.01, 5)
    splits = ["tune"] * 20 + ["eval"] * 20
    baseline = {"thresholds": [0.70, 0.72, 0.70], "weights": [0.0, 1.0, 0.0]}  # the planted setting
    result, sweep = tuning_report(above, q, splits, edges, baseline, rounds=2, mode="heldout", progress=False)
    assert result["mode"] == "heldout" and result["n_prompts"] == {"tune": 20, "eval": 20}
    assert result["thresholds"][1] == 0.72
    assert result["mean_hellinger"]["tune"] < 0.01
    assert result["paper_values"]["mean_hellinger"] == {"tune": 0.0, "eval": 0.0}
    # the sweep is each block alone, on the tuning prompts only
    assert sweep["block"].tolist() == [0] * 5 + [1] * 5 + [2] * 5
    np.testing.assert_allclose(sweep["threshold"], np.tile(edges, 3))
    np.testing.assert_allclose(sweep["mean_hellinger"].reshape(3, 5),
                               np.round(single_block_sweep(above[:20], q[:20]), 6))
    # the eval split is not used for tuning: scrambling its targets changes only the eval score
    q2 = q.copy()
    q2[20:] = q2[20:, ::-1]
    again, _ = tuning_report(above, q2, splits, edges, baseline, rounds=2, mode="heldout", progress=False)
    assert again["thresholds"] == result["thresholds"] and again["weights"] == result["weights"]
    assert again["mean_hellinger"]["eval"] > result["mean_hellinger"]["eval"]


def test_summary_for_prompts_joins_shards_by_prompt_id(tmp_path):
    rng = np.random.default_rng(0)
    matches = rng.integers(0, 5, (6, 2, 3))
    counts = rng.integers(0, 5, (6, 2, 3, 4))
    ids = np.array([10, 11, 12, 13, 14, 15])
    write_summary(tmp_path / "b.parquet", ids[3:], matches[3:], counts[3:])  # shards in any order
    write_summary(tmp_path / "a.parquet", ids[:3], matches[:3], counts[:3])
    order = [15, 10, 13, 11, 12, 14]  # the prompt table's order
    m, c = summary_for_prompts([tmp_path / "b.parquet", tmp_path / "a.parquet"], order, 2, 3, 4)
    rows = [order.index(i) for i in ids]
    np.testing.assert_array_equal(m[rows], matches)
    np.testing.assert_array_equal(c[rows], counts)
    m, c = summary_for_prompts([tmp_path / "b.parquet", tmp_path / "a.parquet"], ids, 2, 3, 4)  # in id order
    np.testing.assert_array_equal(m, matches)
    np.testing.assert_array_equal(c, counts)
    with pytest.raises(ValueError, match=r"does not line up with the prompt table: ids missing \[16\].*"
                                         r"unexpected ids \[10\]"):
        summary_for_prompts([tmp_path / "b.parquet", tmp_path / "a.parquet"], [11, 12, 13, 14, 15, 16], 2, 3, 4)
    with pytest.raises(ValueError, match="ids missing"):  # a shard missing
        summary_for_prompts([tmp_path / "a.parquet"], order, 2, 3, 4)
