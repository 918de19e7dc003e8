import numpy as np
import pytest
import torch

from tinylens.approx import approximate, describe, hellinger, single_block_sweep, softmax, tune
from tinylens.search import cumulative


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


def test_describe():
    d = describe(np.array([4.0, 1.0, 3.0, 2.0]))
    assert list(d) == ["mean", "std", "min", "max", "q25", "median", "q75", "n"]
    assert d == {"mean": 2.5, "std": pytest.approx(1.118034), "min": 1.0, "max": 4.0,
                 "q25": 1.75, "median": 2.5, "q75": 3.25, "n": 4}
    assert all(isinstance(d[k], float) for k in ("mean", "std", "min", "max", "q25", "median", "q75"))
    assert d["n"] == 4
    assert describe([1 / 3])["mean"] == 0.333333  # rounded to 6 decimals
