"""Attention against feed-forward output per block (method.md §7): hand-built vectors with known
cosines and ratios, the verdict from the Wilson interval, the parameter share against a real model."""

import numpy as np
import pytest

from tinylens.model import ModelConfig, Transformer
from tinylens.supporting.contributions import (
    block_contributions,
    ffwd_parameter_share,
    share,
    summarize_contributions,
)


def test_hand_built_block_gives_the_worked_out_ratio_and_cosines():
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    sa = np.array([[1.0, 0.0], [0.0, 1.0]])
    ffwd = np.array([[0.0, 2.0], [0.0, -3.0]])
    cols = block_contributions([x, x], [sa, sa], [ffwd, 2 * ffwd])
    assert cols["block"].tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(cols["norm_ratio"], [2, 3, 4, 6])
    np.testing.assert_allclose(cols["cos_ffwd_sa"], [0, -1, 0, -1])
    # prompt 0 of block 0: out = (1, 2); prompt 1: out = (1, 0) + (0, 1) + (0, -3) = (1, -2)
    np.testing.assert_allclose(cols["cos_ffwd_out"][:2], [2 / np.sqrt(5), 2 / np.sqrt(5)])
    np.testing.assert_allclose(cols["cos_sa_out"][:2], [1 / np.sqrt(5), -2 / np.sqrt(5)])
    np.testing.assert_allclose(cols["sa_norm"], [1, 1, 1, 1])
    np.testing.assert_allclose(cols["ffwd_norm"], [2, 3, 4, 6])


def test_zero_attention_gives_an_infinite_ratio_and_zero_cosine():
    cols = block_contributions([np.ones((1, 3))], [np.zeros((1, 3))], [np.ones((1, 3))])
    assert np.isinf(cols["norm_ratio"][0]) and cols["cos_ffwd_sa"][0] == 0.0


def test_verdict_follows_the_interval():
    longer = share(np.array([True] * 30 + [False] * 10))  # Wilson [0.60, 0.86]
    assert longer["direction"] == "above" and longer["ci95"][0] > 0.5 and longer["p"] < 0.05
    assert share(np.array([True] * 10 + [False] * 30))["direction"] == "below"
    undecided = share(np.array([True] * 6 + [False] * 4))
    assert undecided["direction"] == "same" and undecided["ci95"][0] < 0.5 < undecided["ci95"][1]
    assert share(np.array([], dtype=bool))["direction"] == "same"


def test_summary_counts_each_claim_per_block():
    cols = {"block": np.array([0, 0, 0, 1, 1, 1], dtype=np.int8), "sa_norm": np.ones(6), "ffwd_norm": np.ones(6),
            "norm_ratio": np.array([2.0, 3.0, 0.5, 0.1, 0.2, np.inf]), "cos_ffwd_sa": np.zeros(6),
            "cos_ffwd_out": np.array([0.9, 0.8, 0.1, 0.1, 0.2, 0.3]),
            "cos_sa_out": np.array([0.1, 0.2, 0.3, 0.9, 0.8, 0.1])}
    first, second = summarize_contributions(cols, 2)
    assert (first["block"], first["n_prompts"]) == (0, 3)
    assert first["ffwd_longer"]["share"] == pytest.approx(2 / 3)
    assert first["ffwd_closer_to_output"]["share"] == pytest.approx(2 / 3)
    assert second["ffwd_longer"]["share"] == pytest.approx(1 / 3)  # inf counts as longer
    assert second["norm_ratio"]["n"] == 2  # the infinite ratio is left out of the spread
    assert first["norm_ratio"]["median"] == 2.0


def test_the_direction_claim_is_a_t_test_against_its_stated_threshold():
    from tinylens.supporting.contributions import ROUGHLY_SAME_DIRECTION

    cos = np.r_[np.full(50, 0.8), np.full(50, 0.7), np.full(50, 0.1), np.full(50, -0.1)]  # block 0, block 1
    cols = {"block": np.repeat([0, 1], 100).astype(np.int8), "sa_norm": np.ones(200), "ffwd_norm": np.ones(200),
            "norm_ratio": np.ones(200), "cos_ffwd_sa": cos, "cos_ffwd_out": np.zeros(200), "cos_sa_out": np.zeros(200)}
    first, second = summarize_contributions(cols, 2)
    assert ROUGHLY_SAME_DIRECTION == 0.5
    assert first["cos_ffwd_sa_against_same_direction"]["direction"] == "above"
    assert first["cos_ffwd_sa_against_same_direction"]["mean"] == pytest.approx(0.75)
    assert second["cos_ffwd_sa_against_same_direction"]["direction"] == "below"
    assert second["cos_ffwd_sa_against_0"]["direction"] == "same"  # mean 0: neither way


@pytest.mark.parametrize("shape", [dict(vocab_size=65, block_size=256, d_model=384, n_layer=6, n_head=6),
                                   dict(vocab_size=11, block_size=12, d_model=16, n_layer=3, n_head=4)])
def test_parameter_share_counts_the_model(shape):
    model = Transformer(ModelConfig(dropout=0.0, **shape))
    n_head = shape.pop("n_head")
    got = ffwd_parameter_share(**shape)
    assert n_head and got["parameters"] == sum(p.numel() for p in model.parameters())
    assert got["ffwd_parameters"] == sum(p.numel() for b in model.blocks for p in b.ffwd.parameters())
    if shape["d_model"] == 384:
        assert (got["ffwd_parameters"], got["parameters"], round(got["percent"], 2)) == (7_089_408, 10_788_929, 65.71)


def test_rank_fit_and_the_earlier_stages_test():
    from tinylens.supporting.summary import earlier_stages_fit_worse, rank_fit

    fit = rank_fit(np.array([[2.0, 1.0, 1.0], [1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(fit, [[4 / 6, 5 / 6, 1.0], [1.0, 1.0, 1.0]])
    rng = np.random.default_rng(0)
    end = rank_fit(np.column_stack([np.full(30, 10.0), rng.uniform(0, 1, (30, 3))]))  # a line fits well
    early = rank_fit(rng.uniform(1, 2, (30, 4)))  # spread over four directions: rank 3 holds about 3/4
    got = earlier_stages_fit_worse({6: end, 5: early, 4: end}, n_layer=6)
    assert got["5"]["holds"] and got["5"]["p_value"] < 1e-6
    assert not got["4"]["holds"]  # rank 3 of the same samples fits at least as well as rank 1
