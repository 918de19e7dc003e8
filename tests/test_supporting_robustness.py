"""The robustness of the approximation (method.md §7): hand-built cases with known answers."""

import numpy as np
import pytest

from tinylens.supporting.robustness import (
    above_counts,
    count_entries,
    euclidean_edges,
    paired_comparison,
    prompt_positions,
    scores,
    unique_windows,
    variants,
    windows,
)


def test_scores_cosine_and_minus_euclidean_distance():
    prompts = np.array([[3.0, 4.0]])
    strings = np.array([[3.0, 4.0], [4.0, -3.0], [0.0, 0.0], [6.0, 8.0]])
    np.testing.assert_allclose(scores(prompts, strings, "cosine"), [[1.0, 0.0, 0.0, 1.0]])
    np.testing.assert_allclose(scores(prompts, strings, "euclidean"), [[0.0, -np.sqrt(50), -5.0, -5.0]])
    with pytest.raises(ValueError, match="similarity"):
        scores(prompts, strings, "manhattan")


def test_euclidean_edges_let_through_as_many_pairs_as_the_cosine_edges():
    # one prompt, five strings: cosines 0.99 0.9 0.8 0.5 0.1; distances 1 2 3 4 5 (scores -1 ... -5)
    cos = np.array([0.99, 0.9, 0.8, 0.5, 0.1])
    dist = -np.array([3.0, 1.0, 5.0, 2.0, 4.0])  # another order: only the counts are matched
    edges = euclidean_edges(cos, dist, np.array([0.0, 0.85, 0.95, 0.995]))
    # cos > 0: 5 pairs -> everything; > 0.85: 2 -> halfway between the 2nd and 3rd closest (2 and 3);
    # > 0.95: 1 -> between 1 and 2; > 0.995: none -> above the closest
    np.testing.assert_allclose(edges, [-6.0, -2.5, -1.5, 0.0])
    for k, edge in enumerate([0.0, 0.85, 0.95, 0.995]):
        assert (dist > edges[k]).sum() == (cos > edge).sum()


def test_above_counts_sums_next_token_counts_above_each_edge():
    score = np.array([[0.9, 0.75, 0.5], [0.2, 0.95, 0.85]])
    counts = np.array([[1, 0, 2], [0, 3, 0], [5, 0, 0]])  # strings x vocab
    string, token, count = count_entries(counts)
    got = above_counts(score, np.array([0.7, 0.8, 0.9]), token, string, count, 3)
    # prompt 0: > 0.7: strings 0, 1; > 0.8: string 0; > 0.9: none (0.9 is not > 0.9)
    np.testing.assert_array_equal(got[0], [[1, 3, 2], [1, 0, 2], [0, 0, 0]])
    # prompt 1: > 0.7: strings 1, 2; > 0.8: 1, 2; > 0.9: 1
    np.testing.assert_array_equal(got[1], [[5, 3, 0], [5, 3, 0], [0, 3, 0]])


def test_unique_windows_and_their_next_token_counts():
    ids = np.array([0, 1, 0, 1, 0, 2])
    strings, counts = unique_windows(ids, 2, 3)
    assert [tuple(s) for s in strings] == [(0, 1), (0, 2), (1, 0)]
    # 01 is followed by 0 twice; 02 ends the text (no next token); 10 by 1 once and 2 once
    np.testing.assert_array_equal(counts, [[2, 0, 0], [0, 0, 0], [0, 1, 1]])


def test_prompt_positions_keep_tuning_and_evaluation_windows_apart():
    ends, splits = prompt_positions(100, 15, 20, 0.5, seed=0)
    assert list(splits).count("tune") == 10 and list(splits).count("eval") == 10
    assert (ends[splits == "tune"] <= 50).all() and (ends[splits == "tune"] >= 15).all()
    assert (ends[splits == "eval"] - 15 >= 50).all() and (ends[splits == "eval"] <= 100).all()
    assert len(set(ends)) == 20
    ids = np.arange(100)
    np.testing.assert_array_equal(windows(ids, ends[:1], 5)[0], np.arange(ends[0] - 5, ends[0]))
    with pytest.raises(ValueError, match="too few windows"):
        prompt_positions(40, 15, 20, 0.5, seed=0)


def test_variants_default_first():
    assert variants(10, [15, 5, 10]) == [("cosine_len10", "cosine", 10), ("euclidean_len10", "euclidean", 10),
                                         ("cosine_len5", "cosine", 5), ("cosine_len15", "cosine", 15)]


def test_paired_comparison_known_answer():
    default = np.array([0.1, 0.2, 0.3, 0.4])
    worse = default + np.array([0.1, 0.1, 0.1, 0.1]) + np.array([0.0, 0.01, -0.01, 0.0])
    c = paired_comparison(worse, default)
    assert c["mean_difference"] == pytest.approx(0.1)
    # differences 0.1, 0.11, 0.09, 0.1: sd (n-1) = sqrt(0.0002 / 3), SE = sd / 2
    assert c["standard_error"] == pytest.approx(np.sqrt(0.0002 / 3) / 2, abs=1e-6)
    assert c["verdict"] == "worse"
    assert paired_comparison(default - 0.05, default)["verdict"] == "better"
    same = paired_comparison(default + np.array([0.01, -0.01, 0.02, -0.02]), default)
    assert same["verdict"] == "no different"
    assert paired_comparison(default, default)["wilcoxon_p"] is None


def test_the_verdict_is_the_quoted_tests_and_the_sentence_agrees_with_it():
    """The paired t-test decides, and its p is the one quoted: where the rank test (Wilcoxon, the differences'
    median) and the mean disagree, the words follow the mean's test."""
    from tinylens.supporting.robustness import findings_sentence
    from tinylens.wording import disagreements

    rng = np.random.default_rng(0)
    default = rng.uniform(0.1, 0.4, 100)
    # most prompts a little better, a few much worse: the median moves, the mean does not
    d = np.where(np.arange(100) < 90, -0.01, 0.09) + rng.normal(0, 0.002, 100)
    c = paired_comparison(default + d, default)
    assert c["wilcoxon_p"] < 0.05 and c["test"]["p"] >= 0.05
    assert c["verdict"] == "no different"
    robustness = {"default": "cosine_len10", "settings": {"text_chars": 5000},
                  "variants": {"cosine_len10": {"similarity": "cosine", "length": 10, "mean_hellinger": 0.2, "n": 100},
                               "cosine_len5": {"similarity": "cosine", "length": 5, "versus_default": c}}}
    sentence = findings_sentence(robustness)
    assert "it is no different (Hellinger difference" in sentence and f"p = {c['test']['p']:.2g}" in sentence
    assert "Wilcoxon" not in sentence and disagreements(sentence) == []


def _summary():
    from tinylens.supporting.robustness import summarize

    rows = variants(10, [5])
    default = np.array([0.10, 0.20, 0.30, 0.40])
    hellingers = {"cosine_len10": default, "euclidean_len10": default + np.array([0.10, 0.11, 0.09, 0.10]),
                  "cosine_len5": default + np.array([0.01, -0.01, 0.02, -0.02])}
    tuned = {name: {"thresholds": [1, 0], "weights": [0.5, 0.5], "tune_mean_hellinger": 0.2} for name, _, _ in rows}
    edges = {name: [[0.7, 0.8], [0.75, 0.85]] for name, _, _ in rows}
    return summarize(hellingers, tuned, rows, edges, {"text_chars": 5000, "lengths": [5]}, {5: 900, 10: 1200})


def test_summary_compares_every_variant_with_the_default():
    s = _summary()
    assert s["default"] == "cosine_len10" and "versus_default" not in s["variants"]["cosine_len10"]
    assert s["variants"]["cosine_len10"]["mean_hellinger"] == pytest.approx(0.25)
    assert s["variants"]["cosine_len10"]["threshold_scores"] == [0.8, 0.75]  # block 0 at index 1, block 1 at 0
    assert s["variants"]["euclidean_len10"]["versus_default"]["verdict"] == "worse"
    assert s["variants"]["cosine_len5"]["versus_default"]["verdict"] == "no different"
    assert s["variants"]["cosine_len5"]["strings"] == 900


def test_the_findings_state_each_variants_verdict_from_the_metrics():
    from tinylens.supporting.summary import findings

    sentence = [s for s in findings({"supporting": _minimal_supporting(_summary())}) if "Euclidean" in s]
    assert len(sentence) == 1
    assert "with Euclidean distance it is worse (Hellinger difference 0.1, 95% interval " in sentence[0]
    assert "with strings of length 5 it is no different" in sentence[0]
    assert "mean Hellinger 0.25 on 4 held-out prompts" in sentence[0] and "first 5,000 characters" in sentence[0]
    # metrics of a run made before the comparison existed: no sentence, no error
    assert not [s for s in findings({"supporting": _minimal_supporting(None)}) if "Euclidean" in s]


def _minimal_supporting(robustness):
    """The least of metrics/supporting.json that the family's findings read, with a robustness section."""
    from tinylens.measures import mean_test
    from tinylens.supporting.contributions import contributions_section

    block = {"one_token_drop_ffwd": 0.5, "one_token_drop_sa": 0.1}
    difference = [{"block": 0, "over_seeds": mean_test([0.4, 0.3, 0.5]), "per_seed": {"1": {}, "2": {}, "3": {}}}]
    cols = {"block": np.zeros(4, dtype=np.int8), "sa_norm": np.ones(4), "ffwd_norm": np.ones(4),
            "norm_ratio": np.array([2.0, 3.0, 0.5, 4.0]), "cos_ffwd_sa": np.array([0.1, 0.2, 0.0, 0.1]),
            "cos_ffwd_out": np.ones(4), "cos_sa_out": np.zeros(4)}
    versus = contributions_section({"paper": cols}, 1, {"vocab_size": 5, "block_size": 4, "d_model": 8, "n_layer": 1})
    doc = {"ablation": {"comparison": {"paper": [block]}, "ffwd_minus_sa": {"paper": {"one_token": difference}}},
           "criterion": {"comparison": {"paper": []}}, "attention_vs_ffwd": versus,
           "token_subspaces": {"a_at_ln_f_input": {"sigma_ratio": None}, "stages": {}}, "ffwd_endpoint": {}}
    if robustness is not None:
        doc["robustness"] = robustness
    return doc
