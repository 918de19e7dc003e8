"""The criterion of method.md §7 on hand-built cases with known answers (issue 17.4: strict cut-offs,
no renormalisation, same-stage pairing)."""

import math

import numpy as np
import pytest

from tinylens.measures import descending_ranks
from tinylens.supporting.criterion import (
    CriterionSettings,
    chance_exact,
    criterion_by_block,
    evaluate_block,
    holds,
    permutation_null,
    prefix_length,
    stage_for,
    top_tokens,
    truncate,
)


def test_a_prefix_holding_exactly_90_percent_is_not_enough():
    # 5 + 4 = 9 of 10: exactly 90%, and the cut-off is a strict >, so the third token is needed.
    assert prefix_length(np.array([5, 4, 1]), 0.9) == 3
    assert top_tokens(np.array([5, 4, 1])).tolist() == [True, True, True]
    # Just above the tie, two are enough.
    assert prefix_length(np.array([50, 41, 9]), 0.9) == 2
    # 28 + 17 = 45 of 50 is exactly 90% too, but float cumulative probabilities give
    # 0.56 + 0.34 = 0.9000000000000001 > 0.9: the comparison must be exact.
    assert np.cumsum(np.array([28, 17, 5]) / 50)[1] > 0.9
    assert prefix_length(np.array([28, 17, 5]), 0.9) == 3
    assert top_tokens(np.array([17, 5, 28])).tolist() == [True, True, True]


def test_the_99_percent_truncation_is_strict_too():
    counts = np.array([45, 45, 9, 1])  # 99 of 100 after three tokens: not more than 99%, keep the fourth
    assert truncate(counts, 0.99).tolist() == [45, 45, 9, 1]
    assert truncate(np.array([1, 900, 95, 4]), 0.99).tolist() == [0, 900, 95, 0]  # 995/1000 > 99%


def test_the_truncated_distribution_is_not_renormalised():
    counts = np.array([800, 99, 92, 5, 4])  # total 1000
    assert truncate(counts, 0.99).tolist() == [800, 99, 92, 0, 0]  # 991 > 990
    # top_n is measured against the original total: 899/1000 is not > 90%, so three tokens.
    assert top_tokens(counts).sum() == 3
    # Renormalised (899/991 = 0.907 > 0.9) it would have been two: this is the difference.
    assert prefix_length(truncate(counts, 0.99), 0.9) == 2


def test_order_and_ranks_break_ties_by_token_id():
    # 10 + 1 = 11 of 12 > 90%: the cut falls inside the tie of the two 1s; the lower token id goes in
    assert top_tokens(np.array([10, 1, 1])).tolist() == [True, True, False]
    assert top_tokens(np.array([1, 1, 10])).tolist() == [True, False, True]
    counts = np.tile([3, 1], 50)  # 150 + 50 = 200; > 180 takes all 50 threes and the first 31 ones
    expected = [True] * 100
    expected[63::2] = [False] * 19
    assert top_tokens(counts, truncate_mass=0.99).tolist() == expected


def test_an_empty_approximation_has_no_top_tokens_and_never_holds():
    top = top_tokens(np.zeros((1, 4), dtype=np.int64))
    assert not top.any()
    assert not holds(top, np.zeros((1, 4), dtype=np.int64), 2)[0]


def test_the_criterion_on_a_hand_built_case():
    # 6 tokens, k = 3. Scores rank tokens 4, 0, 2 first (in that order).
    scores = np.array([[0.8, -0.1, 0.5, 0.0, 0.9, 0.2]])
    rank = descending_ranks(scores, base=0, ties="by_position")
    assert rank.tolist() == [[1, 5, 2, 4, 0, 3]]
    assert holds(np.array([[True, False, True, False, True, False]]), rank, 3)[0]  # ranks 1, 2, 0
    assert not holds(np.array([[True, False, False, False, False, True]]), rank, 3)[0]  # token 5 ranks 3
    assert holds(np.array([[False] * 5 + [True]]), rank, 4)[0]


def test_absolute_and_signed_cosines_rank_differently():
    directions = np.eye(4)
    ffwd = np.array([[-3.0, 1.0, 0.5, 0.0]])  # |cos| ranks token 0 first; the signed cosine ranks it last
    counts = np.array([[10, 0, 0, 0]])  # top_n = {0}
    result = evaluate_block(counts, ffwd, directions, k=2, truncate_mass=0.99, top_mass=0.9)
    assert result["top_n"].tolist() == [1]
    assert result["holds_abs"].tolist() == [True] and result["holds_signed"].tolist() == [False]


def test_the_exact_chance_level_is_method_md_s():
    expected = {1: 49.2, 2: 23.8, 3: 11.4, 4: 5.3, 5: 2.4}
    for n, percent in expected.items():
        assert 100 * chance_exact(n, 65, 32) == pytest.approx(percent, abs=0.05)
    assert chance_exact(2, 6, 3) == pytest.approx(math.comb(3, 2) / math.comb(6, 2))


def test_the_permutation_null_agrees_with_the_exact_formula():
    rng = np.random.default_rng(0)
    n_prompts, vocab, k = 400, 10, 5
    rank = descending_ranks(rng.normal(size=(n_prompts, vocab)), base=0, ties="by_position")
    one = np.zeros((n_prompts, vocab), dtype=bool)
    one[:, 0] = True
    null = permutation_null(one, rank, k, permutations=200, seed=1)
    assert null.shape == (200,)
    # each draw is a share of 400 Bernoulli(k/V) prompts
    assert null.mean() == pytest.approx(k / vocab, abs=3 * math.sqrt(0.25 / (400 * 200)))
    assert null.std() == pytest.approx(math.sqrt(0.25 / 400), rel=0.2)
    two = np.zeros((n_prompts, vocab), dtype=bool)
    two[:, [3, 7]] = True
    assert permutation_null(two, rank, k, 200, seed=2).mean() == pytest.approx(chance_exact(2, vocab, k), abs=0.01)
    # more top tokens than places: it can never hold
    many = np.zeros((n_prompts, vocab), dtype=bool)
    many[:, : k + 1] = True
    assert permutation_null(many, rank, k, 20, seed=3).max() == 0.0
    # the null keeps each prompt's real ranks, only the token they belong to moves
    assert permutation_null(one, rank, k, 20, seed=4).min() > 0.3


def test_the_same_stage_pairing_of_method_md():
    stages = [6, 5, 4]
    assert [stage_for(b, "end_of_model", 6, stages) for b in range(6)] == [6] * 6
    # block 6 (index 5) with the input of ln_f, block 5 with the input of block 6, block 4 with block 5's
    assert [stage_for(b, "same_stage", 6, stages) for b in (5, 4, 3)] == [6, 5, 4]
    assert stage_for(2, "same_stage", 6, stages) is None
    with pytest.raises(ValueError, match="unknown subspace variant"):
        stage_for(0, "elsewhere", 6, stages)


def test_float_counts_are_refused():
    with pytest.raises(TypeError, match="integer counts"):
        prefix_length(np.array([0.5, 0.4, 0.1]), 0.9)


def test_the_search_summarys_unsigned_counts_give_the_same_result():
    """The summaries are uint32; negating them to rank would wrap around."""
    directions, ffwd = np.eye(4), np.array([[-3.0, 1.0, 0.5, 0.0]])
    counts = np.array([[10, 0, 3, 0]])
    signed = evaluate_block(counts, ffwd, directions, k=2, truncate_mass=0.99, top_mass=0.9)
    unsigned = evaluate_block(counts.astype(np.uint32), ffwd, directions, k=2, truncate_mass=0.99, top_mass=0.9)
    assert signed["top_n"].tolist() == [2]
    for key in signed:
        np.testing.assert_array_equal(unsigned[key], signed[key])


def test_criterion_by_block_on_a_hand_built_case():
    """Two blocks, subspaces learned only at stage 2 (the input of ln_f): block 0 has only its
    end-of-model pairing, block 1 both (stage 2 is also where its output lands)."""
    alone = np.array([[[0, 7, 3, 0], [9, 0, 0, 1]],
                      [[0, 0, 0, 0], [2, 2, 5, 1]]], dtype=np.uint32)  # [prompt block vocab], as the summary
    directions = {2: np.eye(4)}
    ffwd = [np.array([[0.1, 1.0, 0.9, 0.0], [1.0, 0.0, 0.0, 0.0]]),
            np.array([[1.0, 0.0, 0.0, -0.5], [0.0, 0.0, -1.0, 0.2]])]
    rows, blocks = criterion_by_block(alone, ffwd, directions, np.array([5, 8], dtype=np.int32), "abcd", k=2,
                                      settings=CriterionSettings(truncate_mass=0.99, top_mass=0.9, permutations=10,
                                                                 seed=0))
    assert rows["block"] == [0, 0, 1, 1, 1, 1] and rows["prompt_id"] == [5, 8, 5, 8, 5, 8]
    assert rows["subspaces"] == ["end_of_model"] * 4 + ["same_stage"] * 2 and set(rows["stage"]) == {2}
    # block 0: prompt 5's "b" 7 and "c" 3 (7/10 is not > 90%: both); prompt 8 has no strings
    assert rows["top_tokens"][:2] == ["bc", ""] and rows["empty"][:2] == [False, True]
    # block 1: prompt 5's 9/10 is not > 90%, so "a" and "d"; prompt 8's counts 2 2 5 1 give "c", then
    # "a", "b" (ties by id), then "d" (9/10 again)
    assert rows["top_tokens"][2:4] == ["ad", "cabd"] and rows["top_n"][2:4] == [2, 4]
    # block 0, prompt 5: b and c rank first -> holds; block 1, prompt 5: a and d rank first by |cos| but
    # d ranks last by the signed cosine; prompt 8 would need all 4 tokens in the top 2
    assert rows["holds_abs"][:4] == [True, False, True, False]
    assert rows["holds_signed"][:4] == [True, False, False, False]
    assert list(blocks) == ["0", "1"] and list(blocks["0"]) == ["end_of_model"]
    assert blocks["1"]["same_stage"]["stage"] == 2 and blocks["0"]["end_of_model"]["used"] == 1
    assert blocks["0"]["end_of_model"]["rate_abs"] == 100.0
    # the variants asked for only (the block-alone criterion of method.md §6b computes end_of_model alone)
    rows, blocks = criterion_by_block(alone, ffwd, directions, np.array([5, 8], dtype=np.int32), "abcd", k=2,
                                      settings=CriterionSettings(truncate_mass=0.99, top_mass=0.9, permutations=10,
                                                                 seed=0), variants=["end_of_model"])
    assert rows["subspaces"] == ["end_of_model"] * 4 and list(blocks["1"]) == ["end_of_model"]


def test_prompts_whose_top_tokens_did_not_converge_are_left_out_and_counted():
    alone = np.array([[[0, 7, 3, 0]], [[9, 1, 0, 0]], [[0, 0, 0, 0]]], dtype=np.uint32)  # 3 prompts, 1 block
    directions = {1: np.eye(4)}
    ffwd = [np.array([[0.1, 1.0, 0.9, 0.0], [1.0, 0.9, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])]
    settings = CriterionSettings(truncate_mass=0.99, top_mass=0.9, permutations=5, seed=0)
    # token "c" did not converge: prompt 0 (top "bc") is left out; prompt 1 (top "ab") stays; prompt 2 is empty
    rows, blocks = criterion_by_block(alone, ffwd, directions, np.array([0, 1, 2], dtype=np.int32), "abcd", k=2,
                                      settings=settings, converged={1: np.array([True, True, False, True])})
    assert rows["unconverged"][:3] == [True, False, False]  # end_of_model; same_stage (also stage 1) repeats it
    entry = blocks["0"]["end_of_model"]
    assert (entry["used"], entry["empty"], entry["excluded_unconverged"]) == (1, 1, 1)
    _, every = criterion_by_block(alone, ffwd, directions, np.array([0, 1, 2], dtype=np.int32), "abcd", k=2,
                                  settings=settings)
    assert every["0"]["end_of_model"]["used"] == 2 and every["0"]["end_of_model"]["excluded_unconverged"] == 0


def test_aligned_subspaces_list_the_tokens_by_absolute_cosine():
    from tinylens.supporting.criterion import aligned_for_prompts

    directions = np.eye(4)
    ffwd = [np.array([[0.1, -1.0, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]]), np.array([[0.0, 0.0, 0.2, 0.9]] * 2)]
    got = aligned_for_prompts([8, 33], np.array([33, 8]), ["first", "second"], ffwd, directions, "abcd", top=2,
                              converged=np.array([True, False, True, True]))
    assert list(got) == ["8", "33"] and got["33"]["string"] == "first"
    block1 = got["33"]["blocks"][0]
    assert [e["token"] for e in block1] == ["b", "c"] and block1[0]["cosine"] == pytest.approx(-1 / np.sqrt(1.26))
    assert [e["converged"] for e in block1] == [False, True] and [e["rank"] for e in block1] == [1, 2]
    assert [e["token"] for e in got["33"]["blocks"][1]] == ["d", "c"]
    assert aligned_for_prompts([99], np.array([1]), ["x"], ffwd, directions, "abcd", top=2) == {}
    # the rule's lists use the last learned stage (the input of ln_f) and its convergence flags
    from tinylens.supporting.criterion import CriterionSettings, aligned_end_of_model

    settings = CriterionSettings(0.99, 0.9, 1, 0, aligned_prompts=(33,), aligned_top=2)
    flags = np.array([True, False, True, True])
    end = aligned_end_of_model(settings, np.array([33, 8]), ["first", "second"], ffwd,
                               {3: np.eye(4)[::-1], 4: directions}, "abcd", {3: ~flags, 4: flags})
    assert end == {"33": got["33"]}


def test_block_alone_counts_sum_the_bins_at_and_above_each_blocks_threshold():
    from tinylens.supporting.criterion import block_alone_counts

    edges = np.array([0.7, 0.8, 0.9])
    binned = np.arange(1 * 2 * 3 * 2).reshape(1, 2, 3, 2)  # [prompts blocks bins vocab]
    got = block_alone_counts(binned, [0.8, 0.9], edges)
    np.testing.assert_array_equal(got, [[binned[0, 0, 1:].sum(0), binned[0, 1, 2:].sum(0)]])
