"""The controls of the core claim (method.md §6b): hand-built cases with known answers."""

import numpy as np
import pytest

from tinylens.core.approx import block_alone_thresholds, tune_and_evaluate
from tinylens.core.controls import (
    VECTORS,
    block_shares,
    block_vectors,
    evaluate_sources,
    mode_summary,
    sample_rows,
    tuning_rows,
    vector_fit,
    verdict,
)
from tinylens.core.search import CountsCSR, cumulative, search_block_bruteforce, threshold_edges
from tinylens.core.strings import build_strings
from tinylens.core.suffix import suffix_counts
from tinylens.measures import hellinger


def _naive_suffix_counts(text, prompt, k, vocab):
    out = np.zeros(vocab, dtype=np.int64)
    for i in range(k, len(text)):
        if list(text[i - k:i]) == list(prompt[-k:]):
            out[text[i]] += 1
    return out


def test_suffix_counts_are_the_next_characters_of_every_occurrence_of_each_suffix():
    rng = np.random.default_rng(0)
    text = rng.integers(0, 3, 400)  # a small alphabet: every suffix of up to 4 occurs, longer ones rarely
    prompts = np.stack([text[i:i + 6] for i in rng.integers(0, 390, 12)] + [np.array([2, 2, 2, 2, 2, 2])])
    got = suffix_counts(text, prompts, 6, 3)
    assert got.shape == (13, 6, 3)
    for p in range(13):
        for k in range(1, 7):
            np.testing.assert_array_equal(got[p, k - 1], _naive_suffix_counts(text, prompts[p], k, 3), err_msg=(p, k))
    assert got[:, 0].sum() > 0 and (got[:, 5].sum(axis=1) <= got[:, 0].sum(axis=1)).all()


def test_the_longest_suffix_counts_are_the_string_tables_next_token_counts():
    """At k = substring_length the baseline's counts are the prompt's own string's, in both searched texts."""
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 4, 3000)
    text = "".join("abcd"[i] for i in ids)
    table = build_strings(text, ids, 5, 4, n_train=2700)
    rows = rng.integers(0, len(table), 20)
    prompts = np.array([["abcd".index(c) for c in table.strings[r]] for r in rows])
    np.testing.assert_array_equal(suffix_counts(ids, prompts, 5, 4)[:, 4], table.next_counts[rows])
    np.testing.assert_array_equal(suffix_counts(ids[:2700], prompts, 5, 4)[:, 4], table.next_counts_train[rows])


def test_tuning_rows_tune_the_paper_mode_on_the_corpus_modes_tuning_prompts():
    tables = {
        "corpus": ({"prompt_id": [0, 1, 2, 3], "split": ["tune", "tune", "eval", "eval"]}, {"x": np.array([0, 1, 2, 3])}),
        "paper": ({"prompt_id": [7, 8, 9], "split": ["eval"] * 3}, {"x": np.array([10, 11, 12])}),
        "heldout": ({"prompt_id": [0, 1, 2], "split": ["eval", "tune", "eval"]}, {"x": np.array([20, 21, 22])}),
    }
    loaded = []

    def load(mode):
        loaded.append(mode)
        return tables[mode]

    arrays, splits, ids = tuning_rows("paper", {"paper": "corpus"}, load)
    np.testing.assert_array_equal(arrays["x"], [0, 1, 10, 11, 12])
    assert list(splits) == ["tune", "tune", "eval", "eval", "eval"] and list(ids) == [7, 8, 9]
    arrays, splits, ids = tuning_rows("heldout", {"heldout": "heldout"}, load)
    np.testing.assert_array_equal(arrays["x"], [21, 20, 22])  # tuning rows first, then the evaluation rows
    assert list(splits) == ["tune", "eval", "eval"] and list(ids) == [0, 2]
    assert loaded == ["corpus", "paper", "heldout"]  # a mode tuned on itself is read once


def test_evaluate_sources_writes_one_row_per_evaluation_prompt_of_each_mode():
    tables = {"heldout": ({"prompt_id": [5, 6, 7], "split": ["tune", "eval", "eval"]}, {"h": np.array([0.1, 0.2, 0.3])})}

    def fit(mode, arrays, splits):
        return {"constant": ({"weights": [1.0]}, arrays["h"][splits == "eval"])}

    tuned, columns = evaluate_sources(["heldout"], {"heldout": "heldout"}, lambda m: tables[m], fit)
    assert columns == {"mode": ["heldout", "heldout"], "prompt_id": [6, 7], "hellinger_constant": [0.2, 0.3]}
    assert tuned == {"heldout": {"tuned_with": "heldout", "tuning_prompts": 1, "constant": {"weights": [1.0]}}}


def test_the_block_output_is_the_next_blocks_input_and_the_last_one_the_sum_the_model_makes():
    rng = np.random.default_rng(2)
    acts = {k: rng.normal(size=(4, 3, 5)).astype(np.float32) for k in ("block_input", "sa_out", "ffwd_out")}
    out = block_vectors(acts, "block_output")
    np.testing.assert_array_equal(out[:, :2], acts["block_input"][:, 1:])
    np.testing.assert_array_equal(out[:, 2], (acts["block_input"][:, 2] + acts["sa_out"][:, 2]) + acts["ffwd_out"][:, 2])
    assert out.dtype == np.float32 and block_vectors(acts, "sa_out") is acts["sa_out"]


def test_block_shares_weight_times_matched_mass_and_each_block_alone():
    # one prompt, two blocks, two edges, two tokens: block 0 matches 3 counts at edge 0 and 1 at edge 1; block 1
    # matches 1 count at either edge
    above = np.array([[[[2, 1], [1, 0]], [[0, 1], [0, 1]]]], dtype=np.uint32)  # [prompt block edge vocab]
    q = np.array([[0.5, 0.5]])
    rows = block_shares(above, q, thresholds=np.array([0, 1]), weights=np.array([0.25, 0.75]), alone=np.array([1, 0]))
    # weighted masses 0.25 x 3 and 0.75 x 1: shares 0.5 and 0.5
    assert [r["effective_share"] for r in rows] == [0.5, 0.5] and [r["weight"] for r in rows] == [0.25, 0.75]
    assert rows[0]["alone_at_joint_threshold"]["mean"] == pytest.approx(float(hellinger(np.array([2 / 3, 1 / 3]), q[0])), abs=1e-6)
    assert rows[0]["alone_at_own_threshold"]["mean"] == pytest.approx(float(hellinger(np.array([1.0, 0.0]), q[0])), abs=1e-6)
    assert rows[0]["alone_threshold_index"] == 1 and rows[1]["threshold_index"] == 1
    empty = block_shares(np.zeros_like(above), q, np.array([0, 0]), np.array([0.5, 0.5]), np.array([0, 0]))
    assert empty[0]["effective_share"] is None and empty[0]["alone_no_match"] == 1
    assert empty[0]["alone_at_own_threshold"]["mean"] == pytest.approx(0.0)  # uniform, as the model here


def test_block_alone_thresholds_are_each_curves_minimum_the_lowest_on_a_tie():
    edges = threshold_edges(0.7, 0.01, 4)
    sweep = {"block": np.array([0, 0, 0, 0, 1, 1, 1, 1]), "threshold": np.tile(edges, 2),
             "mean_hellinger": np.array([0.5, 0.3, 0.4, 0.6, 0.2, 0.2, 0.3, 0.2])}
    np.testing.assert_array_equal(block_alone_thresholds(sweep, edges, 2), [1, 0])
    with pytest.raises(ValueError, match="no rows of block 2"):
        block_alone_thresholds(sweep, edges, 3)


def test_the_verdict_is_the_paired_intervals():
    assert verdict({"ci_low": 0.001, "ci_high": 0.05}) == "ffwd_out better"  # the source is further from the model
    assert verdict({"ci_low": -0.05, "ci_high": -0.001}) == "ffwd_out worse"
    assert verdict({"ci_low": -0.01, "ci_high": 0.02}) == "no different"


def test_mode_summary_pairs_each_source_with_its_own_reference_by_prompt_id():
    rng = np.random.default_rng(3)
    full = rng.random(50)
    evaluation = {"prompt_id": np.arange(50)[::-1], "hellinger_approx": full[::-1], "hellinger_seed7": full + 0.5}
    sample = full + 0.1
    controls = {"prompt_id": np.arange(50), "hellinger_suffix": full + 0.2 + 0.01 * rng.normal(size=50),
                "hellinger_null": full + 0.01 * rng.normal(size=50), "hellinger_ffwd_out": sample,
                "hellinger_sa_out": sample - 0.05 + 0.001 * rng.normal(size=50),
                **{f"hellinger_{k}": sample + 0.01 * rng.normal(size=50) for k in ("block_input", "block_output",
                                                                                  "ffwd_and_sa_out")}}
    out = mode_summary(evaluation, controls, [7])["sources"]
    assert out["suffix"]["verdict"] == "ffwd_out better" and out["suffix"]["reference"] == "ffwd_out"
    assert out["suffix"]["versus_ffwd_out"]["mean_difference"] == pytest.approx(0.2, abs=0.01)
    assert out["null"]["verdict"] == "no different"
    # the vector controls pair with ffwd_out on the sample, not on every string
    assert out["sa_out"]["reference"] == "ffwd_out_sample" and out["sa_out"]["verdict"] == "ffwd_out worse"
    assert out["sa_out"]["versus_ffwd_out"]["mean_difference"] == pytest.approx(-0.05, abs=0.001)
    assert out["ffwd_out_sample"]["versus_ffwd_out"]["mean_difference"] == pytest.approx(0.1)
    assert out["ffwd_out"]["mean"] == pytest.approx(full.mean(), abs=1e-6) and "verdict" not in out["seed7"]
    with pytest.raises(ValueError, match="not the evaluation table's"):
        mode_summary({**evaluation, "prompt_id": np.arange(1, 51)}, controls, [7])


def test_sample_rows_are_a_seeded_sample_in_table_order():
    rows = sample_rows(1000, 100, seed=4)
    assert len(set(rows)) == 100 and (np.diff(rows) > 0).all()
    np.testing.assert_array_equal(rows, sample_rows(1000, 100, seed=4))
    np.testing.assert_array_equal(sample_rows(10, 100, seed=4), np.arange(10))


class _Table:
    """A string table's counts and members in one searched text."""

    def __init__(self, counts, members):
        self._counts, self._members = counts, members

    def counts(self, mode):
        return self._counts

    def members(self, mode):
        return self._members


def test_vector_fit_is_the_core_search_and_tuning_of_each_kind_and_joins_twelve_terms():
    rng = np.random.default_rng(5)
    n_p, n_s, blocks, d, vocab = 12, 200, 2, 6, 4
    prompts = {k: rng.normal(size=(n_p, blocks, d)).astype(np.float32) for k in ("block_input", "sa_out", "ffwd_out")}
    strings = {k: (np.repeat(v, n_s // n_p + 1, axis=0)[:n_s] + 0.4 * rng.normal(size=(n_s, blocks, d))).astype(np.float32)
               for k, v in prompts.items()}
    counts = rng.integers(0, 3, (n_s, vocab)).astype(np.uint32)
    members = rng.random(n_s) < 0.8
    q = rng.dirichlet(np.ones(vocab), n_p)
    splits = np.array(["tune"] * 6 + ["eval"] * 6)
    edges = threshold_edges(0.7, 0.05, 5)
    init = np.array([2, 2])
    fit = vector_fit(strings, _Table(counts, members), edges, init, rounds=1,
                     sources=("ffwd_out", "ffwd_and_sa_out"))
    out = fit("heldout", {**prompts, "q": q}, splits)
    above = np.stack([cumulative(search_block_bruteforce(prompts["ffwd_out"][:, b], strings["ffwd_out"][:, b],
                                                         counts, edges, members)[1], axis=1) for b in range(blocks)], 1)
    expected = tune_and_evaluate(above, q, splits, init, 1)
    assert out["ffwd_out"][0] == expected[0]
    np.testing.assert_allclose(out["ffwd_out"][1], expected[1])
    assert len(out["ffwd_and_sa_out"][0]["thresholds"]) == 2 * blocks  # each block's ffwd_out and sa_out, own values
    # the block output reuses the block input's searches of blocks 2..n: the same as searching it afresh
    both = vector_fit(strings, _Table(counts, members), edges, init, 1,
                      sources=("block_input", "block_output"))("heldout", {**prompts, "q": q}, splits)
    alone = vector_fit(strings, _Table(counts, members), edges, init, 1,
                       sources=("block_output",))("heldout", {**prompts, "q": q}, splits)
    assert both["block_output"][0] == alone["block_output"][0]
    np.testing.assert_array_equal(both["block_output"][1], alone["block_output"][1])
    assert both["block_input"][0] != both["block_output"][0]
    assert set(VECTORS) == {"ffwd_out", "sa_out", "block_input", "block_output", "ffwd_and_sa_out"}


def test_stacked_search_counts_for_the_null_take_the_permuted_rows():
    counts = np.array([[1, 0], [0, 2], [3, 0]], dtype=np.uint32)
    csr = CountsCSR.from_dense(counts)
    stacked = csr.stacked(csr.take(np.array([2, 0, 1])))
    dense = np.zeros((3, 4), dtype=np.int64)
    for i in range(3):
        for e in range(stacked.indptr[i], stacked.indptr[i + 1]):
            dense[i, stacked.token[e]] += stacked.count[e]
    np.testing.assert_array_equal(dense, [[1, 0, 3, 0], [0, 2, 1, 0], [3, 0, 0, 2]])


def test_evaluation_blocks_read_each_blocks_own_threshold_from_the_sweep_on_the_evaluation_prompts():
    from tinylens.core.controls import evaluation_blocks

    edges = threshold_edges(0.7, 0.1, 2)
    above = np.zeros((3, 1, 2, 2), dtype=np.uint32)
    above[:, 0, 0] = [3, 1]  # at edge 0
    above[:, 0, 1] = [1, 0]  # at edge 1
    q = np.array([[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]])
    sweep = {"block": np.array([0, 0]), "threshold": edges, "mean_hellinger": np.array([0.3, 0.1])}
    tuned = {"thresholds": [0.7], "weights": [1.0]}
    (row,) = evaluation_blocks(above, q, ["tune", "eval", "eval"], tuned, sweep, edges)
    assert row["alone_threshold_index"] == 1 and row["threshold_index"] == 0
    assert row["alone_at_own_threshold"] == {"mean": 0.0, "standard_error": 0.0, "n": 2}  # [1, 0] against q = [1, 0]
    assert row["alone_at_joint_threshold"]["mean"] == pytest.approx(float(hellinger(np.array([0.75, 0.25]), q[1])), abs=1e-6)


def _source(mean, diff=None, lo=None, hi=None, reference="ffwd_out"):
    entry = {"mean": mean, "standard_error": 0.005, "n": 100, "reference": reference}
    if diff is not None:
        test = {"mean_difference": diff, "standard_error": 0.01, "ci_low": lo, "ci_high": hi, "t": 3.0, "p": 0.003,
                "n": 100, "level": 0.95}
        entry.update(versus_ffwd_out=test, verdict=verdict(test))
    return entry


def _controls_metrics():
    held = {"suffix": _source(0.21, 0.04, 0.03, 0.05), "null": _source(0.55, 0.38, 0.36, 0.40),
            "ffwd_out": _source(0.17), "seed1442": _source(0.15),
            "ffwd_out_sample": _source(0.22, 0.05, 0.04, 0.06),
            "sa_out": _source(0.23, 0.01, -0.002, 0.022, "ffwd_out_sample"),
            "block_input": _source(0.25, 0.03, 0.02, 0.04, "ffwd_out_sample"),
            "block_output": _source(0.24, 0.02, 0.01, 0.03, "ffwd_out_sample"),
            "ffwd_and_sa_out": _source(0.21, -0.012, -0.02, -0.004, "ffwd_out_sample")}
    blocks = [{"block": b, "weight": w, "effective_share": s, "alone_at_own_threshold": {"mean": a},
               "alone_at_joint_threshold": {"mean": j}}
              for b, (w, s, a, j) in enumerate([(0.02, 0.5, 0.30, 0.40), (0.9, 0.3, 0.20, 0.22), (0.08, 0.2, 0.25, 0.6)])]
    paper = {k: dict(v) for k, v in held.items()}
    paper["sa_out"] = _source(0.2, -0.02, -0.03, -0.01, "ffwd_out_sample")
    return {"settings": {"suffix_lengths": 10, "sample_strings": 50000, "of_strings": 858923},
            "modes": {"heldout": {"n": 100, "sources": held, "blocks": blocks},
                      "paper": {"n": 80, "sources": paper, "blocks": blocks}}}


def test_the_controls_sentences_take_every_verdict_word_from_the_paired_test():
    from tinylens.core.summary import controls_findings

    text = " ".join(controls_findings(_controls_metrics()))
    assert "the suffix counts of the train text (no network: its strings ending in the prompt's last 1 to 10" in text
    assert ("are 0.21 from the model, further from the model than the approximation (difference 0.04, 95% interval "
            "0.03 to 0.05, p = 0.003)") in text
    assert "(the null) is 0.55, further from the model than the approximation" in text
    assert "another seed of the model is 0.15." in text
    assert ("sample of 50,000 of the 858,923 strings, ffwd_out is 0.22, further from the model than the approximation "
            "(difference 0.05, 95% interval 0.04 to 0.06, p = 0.003); with another vector of each block in its place, "
            "on the same sample: sa_out is 0.23") in text
    assert ("sa_out is 0.23, not distinguishable from ffwd_out on the same sample (difference 0.01, 95% interval "
            "-0.002 to 0.022") in text
    assert ("ffwd_out + sa_out (twelve terms: each block's two, each with its own threshold and weight) is 0.21, "
            "closer to the model than ffwd_out on the same sample") in text
    assert ("the data favour ffwd_out over the suffix counts, the null, the block input, and the block output (by 0.02 "
            "to 0.38 in mean Hellinger distance); they favour ffwd_out + sa_out over ffwd_out (by 0.012); "
            "they cannot tell ffwd_out from sa_out") in text
    assert "On the paper's 80 prompts" in text and "sa_out: ffwd_out worse (difference -0.02)" in text
    assert ("put 0.9 of the weight on block 2, whose matched counts make 0.3 of the weighted total on the average "
            "held-out prompt; each block alone at its own best threshold is 0.3, 0.2, 0.25 from the model (blocks 1 to "
            "3; block 2 closest), and alone at the jointly tuned thresholds 0.4, 0.22, 0.6.") in text


def test_the_core_findings_skip_nothing_when_the_controls_are_there():
    from tinylens.core.summary import findings

    training = {"models": {"1337": {"val_loss": 1.8, "steps": 2000}}}
    hellinger = {"modes": {"heldout": {"approximation": {"mean": 0.17, "std": 0.1, "n": 100},
                                       "alternates": {"1442": {"mean": 0.15}}}}}
    out = findings({"training": training, "hellinger": hellinger, "controls": _controls_metrics()})
    assert out[-1].startswith("The jointly tuned weights") and any("Is it the feed-forward outputs" in s for s in out)


def test_the_controls_figure_draws_each_source_with_its_interval_and_verdict():
    from tinylens.core.plots import Z95, make_controls

    fig = make_controls(_controls_metrics())
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.texts if type(t).__name__ == "Text"]
    assert labels == ["suffix counts (no network)", "ffwd_out (the approximation)", "ffwd_out, counts permuted (null)",
                      "another seed (1442)", "ffwd_out on the sample", "sa_out", "block input", "block output",
                      "ffwd_out + sa_out"]
    means = [float(np.asarray(c[0].get_xdata())[0]) for c in ax.containers]
    np.testing.assert_allclose(means, [0.21, 0.17, 0.55, 0.15, 0.22, 0.23, 0.25, 0.24, 0.21])
    segments = ax.containers[0][2][0].get_segments()[0]
    np.testing.assert_allclose([segments[0][0], segments[1][0]], [0.21 - Z95 * 0.005, 0.21 + Z95 * 0.005])
    notes = [t.get_text() for t in ax.texts if type(t).__name__ == "Annotation"]
    assert notes[0] == "ffwd_out better: +0.040 [+0.030, +0.050]" and len(notes) == 7  # not the references and seed
    assert "no different: +0.010 [-0.002, +0.022]" in notes and "ffwd_out worse: -0.012 [-0.020, -0.004]" in notes
    assert [round(line.get_xdata()[0], 3) for line in ax.lines if line.get_linestyle() == "--"] == [0.17, 0.22]
