"""Seed 001's convex-hull reading (method.md §10): hand-built values and patterns with worked-out
potentials, the shuffled baseline's invariants, the paired verdict, a real model's rows."""

import numpy as np
import pytest
import torch

from tinylens.attention.hull import hull_measures, measure_hull, shuffle_rows, uniform_rows
from tinylens.attention.summary import paired, summarize_hull
from tinylens.model import ModelConfig, Transformer


def test_previous_token_head_on_an_alternating_sequence_gives_the_worked_out_potential():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    values = torch.stack([a, b, a, b, a])[None, None]  # [1 1 5 2]
    pattern = torch.zeros(5, 5)
    pattern[0, 0] = 1.0
    for t in range(1, 5):
        pattern[t, t - 1] = 1.0  # the previous position, whose value is the next one's
    got = hull_measures(values, pattern[None, None], torch.Generator().manual_seed(0))
    # t = 0: m = a, next = b: |b - a|^2 / |b|^2 = 2, cosine 0; t = 1..3: m = next, potential 0, cosine 1
    assert got["real_potential"].item() == pytest.approx(2 / 4)
    assert got["real_cosine"].item() == pytest.approx(3 / 4)
    # uniform: t = 0: a vs b (2, 0); t = 1: (a + b)/2 vs a: |a/2 - b/2|^2 = 1/2, cos 1/sqrt 2;
    # t = 2: (2a + b)/3 vs b: |2a/3 - 2b/3|^2 = 8/9, cos 1/sqrt 5; t = 3: (a + b)/2 vs a: 1/2, 1/sqrt 2
    assert got["uniform_potential"].item() == pytest.approx((2 + 0.5 + 8 / 9 + 0.5) / 4)
    assert got["uniform_cosine"].item() == pytest.approx((0 + 2 / np.sqrt(2) + 1 / np.sqrt(5)) / 4)


def test_next_value_equal_to_the_uniform_mean_has_zero_potential():
    v = [torch.randn(3, generator=torch.Generator().manual_seed(1))]
    for _ in range(5):
        v.append(torch.stack(v).mean(0))  # each value is the mean of those before it
    values = torch.stack(v)[None, None]
    got = hull_measures(values, uniform_rows(6).float()[None, None], torch.Generator().manual_seed(0))
    assert got["real_potential"].item() == pytest.approx(0.0, abs=1e-12)
    assert got["uniform_potential"].item() == pytest.approx(0.0, abs=1e-12)


def test_shuffled_rows_stay_causal_stochastic_and_keep_each_rows_weights():
    g = torch.Generator().manual_seed(3)
    scores = torch.randn(4, 2, 7, 7, generator=g).masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(), -torch.inf)
    pattern = scores.softmax(-1).double()
    shuffled = shuffle_rows(pattern, torch.Generator().manual_seed(0))
    assert torch.allclose(shuffled.sum(-1), torch.ones(4, 2, 7, dtype=torch.float64))
    assert shuffled.triu(1).abs().max() == 0
    assert torch.allclose(shuffled.sort(-1).values, pattern.sort(-1).values)
    assert not torch.allclose(shuffled, pattern)  # something moved


def test_paired_verdict():
    # differences 0.4, 0.35, 0.45: mean 0.4, SE 0.05 / sqrt(3) = 0.029, so 0.4 is 14 SE above 0
    assert paired(np.array([0.1, 0.2, 0.15]), np.array([0.5, 0.55, 0.6]))["verdict"] == "holds"
    assert paired(np.array([0.5, 0.55, 0.6]), np.array([0.1, 0.2, 0.15]))["verdict"] == "fails"
    # differences 0.1, -0.1, 0.3: mean 0.1, SE 0.115: within 1.96 SE of 0
    assert paired(np.array([0.1, 0.6, 0.3]), np.array([0.2, 0.5, 0.6]))["verdict"] == "undecided"
    got = paired(np.array([1.0, 2.0]), np.array([2.0, 4.0]))
    assert (got["difference"], got["se"]) == (1.5, pytest.approx(0.5))


def test_a_model_gives_one_row_per_block_head_window_and_exact_head_outputs():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=11, block_size=12, d_model=16, n_layer=2, n_head=4, dropout=0.0))
    cols = measure_hull(model, torch.randint(0, 11, (5, 12)), seed=0)
    assert len(cols["block"]) == 2 * 4 * 5
    assert cols["identity_error"].max() < 1e-5
    summary = summarize_hull(cols)
    assert summary["n_heads"] == 8
    assert sum(summary["verdicts"]["shuffled"].values()) == 8
    assert np.all(cols["real_potential"] >= 0)
