import numpy as np
import pytest

from tinylens.core.case_studies import approximation, check_prompts, find_matches, match_rows, summarize
from tinylens.core.corpus import CharTokenizer
from tinylens.measures import hellinger


def unit(angle_deg, scale=1.0):
    a = np.deg2rad(angle_deg)
    return scale * np.array([np.cos(a), np.sin(a), 0.0])


# one prompt along x; strings at known angles: cos 0 deg = 1, 18.19 deg ~ 0.95, 25.84 deg ~ 0.9, 60 deg = 0.5
STRINGS = np.array([unit(60), unit(25.84193), unit(0, 3.0), unit(18.19487, 0.5), np.zeros(3)], dtype=np.float32)
PROMPTS = np.array([[[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]])  # [blocks=1 prompts=2 d=3]


def test_find_matches_lists_strings_above_the_cosine_by_decreasing_cosine():
    (per_prompt,) = find_matches(PROMPTS, lambda b: STRINGS, min_cosine=0.7, chunk=2)  # chunks of 2 strings
    idx, cos = per_prompt[0]
    assert idx.tolist() == [2, 3, 1]
    np.testing.assert_allclose(cos, [1.0, 0.95, 0.9], atol=1e-6)
    assert len(per_prompt[1][0]) == 0  # the opposite prompt matches nothing
    (again,) = find_matches(PROMPTS, lambda b: STRINGS, min_cosine=0.7)
    assert again[0][0].tolist() == idx.tolist()


def test_approximation_sums_counts_of_strings_above_each_blocks_threshold():
    counts = np.array([[1, 0], [0, 2], [3, 0], [0, 1], [5, 5]])
    matches = [(np.array([2, 3, 1]), np.array([1.0, 0.95, 0.9])), (np.array([0, 1]), np.array([0.99, 0.8]))]
    p, n = approximation(matches, counts, thresholds=[0.92, 0.85], weights=[1.0, 2.0])
    # block 0 above 0.92: strings 2, 3 -> [3, 1]; block 1 above 0.85: string 0 -> 2 * [1, 0]
    assert n == [2, 1]
    np.testing.assert_allclose(p, [5 / 6, 1 / 6])
    p, n = approximation(matches, counts, thresholds=[0.999, 0.999], weights=[1.0, 1.0])
    assert n == [1, 0]
    np.testing.assert_allclose(p, [1.0, 0.0])
    p, n = approximation(matches, counts, thresholds=[1.0, 1.0], weights=[1.0, 1.0])
    assert n == [0, 0] and np.allclose(p, 0.5)  # nothing above: uniform


def test_summarize_reports_the_papers_case_study_numbers():
    counts = np.array([[1, 0], [0, 2], [3, 0], [0, 1], [5, 5]])
    strings = ["s0", "s1", "s2", "s3", "s4"]
    matches = [(np.array([2, 3, 1]), np.array([0.99, 0.96, 0.92])), (np.array([0]), np.array([0.99]))]
    q = np.array([0.7, 0.3])
    tuned = {"thresholds": [0.95, 0.9], "weights": [1.0, 1.0]}
    s = summarize("0123456789", q, matches, strings, counts, tuned, paper=None, examples=2)
    p = np.array([4.0, 1.0]) / 5  # strings 2, 3 (block 0) and 0 (block 1)
    assert s["tuned"]["matches"] == [2, 1]
    assert s["tuned"]["hellinger"] == pytest.approx(float(hellinger(p, q)), abs=1e-6)
    assert s["examples"] == [["s2", "s3"], ["s0"]]
    assert s["block0_only"]["0.95"]["matches"] == 2 and s["block0_only"]["0.90"]["matches"] == 3
    assert s["block0_only"]["0.97"]["matches"] == 1
    # block 0 alone: strings 2 and 3 -> [3, 1]; block 1's string 0 (0.99 > 0.95) must not count
    assert s["block0_only"]["0.95"]["hellinger"] == pytest.approx(float(hellinger(np.array([0.75, 0.25]), q)),
                                                                  abs=1e-6)
    assert s["block0_only"]["0.97"]["hellinger"] == pytest.approx(float(hellinger(np.array([1.0, 0.0]), q)),
                                                                  abs=1e-6)
    assert "paper_values" not in s


def test_match_rows_and_prompt_check():
    matches = [[(np.array([1]), np.array([0.9])), (np.array([], dtype=int), np.array([]))],
               [(np.array([0, 1]), np.array([0.8, 0.75])), (np.array([1]), np.array([0.99]))]]
    rows = match_rows(["p0", "p1"], matches, ["a", "b"])
    assert rows["prompt"] == ["p0", "p0", "p0", "p1"]
    assert rows["block"].tolist() == [0, 1, 1, 1] and rows["string"] == ["b", "a", "b", "b"]
    tok = CharTokenizer("abc ")
    check_prompts(["abc a"], 5, tok)
    with pytest.raises(ValueError, match=r"'case_study_prompts' has \['abcd', 'abcz '\]"):
        check_prompts(["abcd", "abc a", "abcz "], 5, tok)


def _dense_reference(prompt_vectors, blocks, min_cosine):
    """The definition: float64 cosines of every string, kept above min_cosine, by decreasing cosine."""
    out = []
    for b, strings in enumerate(blocks):
        s = strings.astype(np.float64)
        norms = np.linalg.norm(s, axis=1)
        per_prompt = []
        for p in prompt_vectors[b]:
            cos = (s @ p) / np.maximum(norms * np.linalg.norm(p), 1e-300)
            idx = np.nonzero(cos > min_cosine)[0]
            order = np.argsort(-cos[idx], kind="stable")
            per_prompt.append((idx[order], cos[idx[order]]))
        out.append(per_prompt)
    return out


def test_matches_equal_the_float64_definition_next_to_the_threshold():
    rng = np.random.default_rng(0)
    d, min_cosine = 48, 0.7
    prompts = rng.normal(size=(2, 3, d)).astype(np.float32).astype(np.float64)  # float32 activations
    blocks = []
    for b in range(2):
        strings = [rng.normal(size=(400, d))]
        for p in prompts[b]:
            unit = p / np.linalg.norm(p)
            other = rng.normal(size=(60, d))
            other -= (other @ unit)[:, None] * unit  # orthogonal to the prompt
            other /= np.linalg.norm(other, axis=1, keepdims=True)
            # cosines at, just above and just below the threshold (float32 rounding decides nothing here)
            c = min_cosine + rng.choice([0.0, 1e-7, -1e-7, 3e-6, -3e-6, 2e-5, -2e-5, 0.1, 0.25], size=60)
            strings.append((c[:, None] * unit + np.sqrt(1 - c**2)[:, None] * other) * rng.uniform(0.5, 3, (60, 1)))
        blocks.append(np.concatenate(strings).astype(np.float32))
    got = find_matches(prompts, lambda b: blocks[b], min_cosine)
    expected = _dense_reference(prompts, blocks, min_cosine)
    near = 0
    for b in range(2):
        for i in range(3):
            np.testing.assert_array_equal(got[b][i][0], expected[b][i][0])
            np.testing.assert_allclose(got[b][i][1], expected[b][i][1], rtol=0, atol=1e-15)
            near += int((np.abs(expected[b][i][1] - min_cosine) < 1e-5).sum())
    assert near > 20  # the data really sit next to the threshold
