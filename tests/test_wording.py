"""The findings' words (tinylens.wording): a test's verdict words come from its own p, blocks are counted from 1
for people, and the checker finds sentences whose words and quoted p disagree."""

import pytest

from tinylens.measures import mean_test, share_test
from tinylens.wording import CONVENTION, block, disagreements, grouped, listing, stated, verdict


def test_the_checker_finds_a_verdict_its_quoted_p_contradicts():
    # the default run's robustness sentence before the verdict came from its quoted test
    old = ("with strings of length 5 it is no different (Hellinger difference -0.0072 +- 0.0052, Wilcoxon p = "
           "0.017); with strings of length 15 it is no different (Hellinger difference 0.0044 +- 0.0043, p = 0.65)")
    found = disagreements(old)
    assert len(found) == 1 and "p = 0.017" in found[0]
    assert disagreements("the feed-forward output is longer in block 3 (share 0.52, p = 0.4)")
    assert disagreements("jumps carry 20% of the movement: not dominated (ratio 0.2, p = 0.001)") == []
    assert disagreements("not dominated (ratio 0.2, p = 0.3)")  # the longer phrase is the one said
    assert disagreements("an estimate without a verdict word (mean 0.2, p = 0.3)") == []


def test_stated_words_follow_the_test_never_a_stored_verdict():
    rising = mean_test([0.11, 0.12, 0.1, 0.13, 0.12])
    assert stated(rising, "rises", "falls").startswith("rises (mean 0.12, 95% interval ")
    forged = {**rising, "direction": "same", "verdict": "no different"}  # a stored verdict is not read
    assert verdict(forged, "rises", "falls") == "rises"
    flat = mean_test([0.1, -0.1, 0.2, -0.2])
    assert stated(flat, "rises", "falls").startswith("no different (mean 0, ")
    assert stated({**rising, "p": 0.0}, "rises", "falls").endswith(", p < 1e-300)")  # an underflow is not p = 0
    with pytest.raises(ValueError, match="verdict words"):
        verdict(flat, "goes up", "falls")  # words the checker would not know


def test_grouped_blocks_are_counted_from_1_and_quote_a_p_that_agrees_with_each_group():
    tests = [(block(b), share_test(k, 100)) for b, k in enumerate([90, 30, 52, 80])]
    text = grouped(tests, "longer", "shorter", what="share")
    assert text.startswith("longer in blocks 1 and 4 (shares 0.8 to 0.9, largest p = ")
    assert "; shorter in block 2 (share 0.3, 95% interval " in text and "; no different in block 3 (share 0.52" in text
    assert disagreements(text) == []
    assert listing([1, 2, 3]) == "1, 2 and 3" and listing([]) == "none"
    assert "counted from 1" in CONVENTION and "count from 0" in CONVENTION
