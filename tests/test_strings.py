import itertools

import numpy as np
import pytest

from tinylens.core.corpus import CharTokenizer
from tinylens.core.strings import (
    MODES,
    TUNED_WITH,
    TUNING_MODES,
    build_strings,
    first_occurrence_order,
    heldout_candidates,
    heldout_regions,
    load_strings,
    paper_permutation,
    paper_prompts,
    prompt_sets,
    prompt_shard,
    sample_prompts,
    sample_split_prompts,
    save_strings,
    window_keys,
)

N = 10


@pytest.fixture(scope="module")
def full(corpus_path):
    """The whole corpus, its ids, the 90% split point and its string table (built once: about 1 s)."""
    text = corpus_path.read_text()
    tok = CharTokenizer.fit(text)
    ids = tok.encode(text)
    n_train = int(0.9 * len(ids))
    return text, ids, n_train, build_strings(text, ids, N, tok.vocab_size, n_train)


def test_full_corpus_has_858923_unique_substrings_of_length_10(full):
    text, ids, _, table = full
    assert len(text) == 1_115_394
    assert len(table) == 858_923  # method.md §3
    assert len(set(table.strings)) == len(table)
    assert all(len(s) == N for s in table.strings)
    assert table.next_counts.shape == table.next_counts_train.shape == (858_923, 65)
    assert table.next_counts.dtype == np.uint32


def test_full_corpus_strings_are_sorted(full):
    strings = full[3].strings
    assert all(a < b for a, b in zip(strings, strings[1:]))


def test_full_corpus_counts_add_up(full):
    text, ids, n_train, table = full
    # every window but the very last has a next token
    assert int(table.next_counts.sum(dtype=np.int64)) == len(text) - N
    assert int(table.occurrences.sum(dtype=np.int64)) == len(text) - N + 1
    # each string's counts add up to its occurrences, except the one ending the text (no next token)
    short = table.occurrences.astype(np.int64) - table.next_counts.sum(axis=1, dtype=np.int64)
    last = table.strings.index(text[-N:])
    assert short[last] == 1
    assert np.count_nonzero(short) == 1
    # train counts: windows whose next token lies inside the train text
    assert int(table.next_counts_train.sum(dtype=np.int64)) == n_train - N
    # in_train: exactly the strings that occur inside the train text
    train_text = text[:n_train]
    in_train = {train_text[i : i + N] for i in range(n_train - N + 1)}
    assert int(table.in_train.sum()) == len(in_train)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(table), size=200, replace=False):
        assert bool(table.in_train[i]) == (table.strings[i] in in_train)
    # no train counts for strings that are not in the train text
    assert not table.next_counts_train[~table.in_train].any()


def test_full_corpus_counts_of_a_known_string(full):
    text, ids, _, table = full
    s = "And only l"
    i = table.strings.index(s)
    starts = [k for k in range(len(text) - N + 1) if text.startswith(s, k)]
    assert table.occurrences[i] == len(starts)
    expected = np.zeros(65, dtype=np.int64)
    for k in starts:
        if k + N < len(text):
            expected[ids[k + N]] += 1
    np.testing.assert_array_equal(table.next_counts[i], expected)


# A hand-made text: train = "abcabc", validation = "dabcx"; strings of length 3.
#   start: window -> next     start: window -> next
#   0: abc -> a (train)        5: cda -> b
#   1: bca -> b (train)        6: dab -> c  (only in validation)
#   2: cab -> c (train)        7: abc -> x  (abc is in both parts)
#   3: abc -> d (next in val)  8: bcx -> -  (the last window: no next token)
#   4: bcd -> a (straddles the split)
TINY = "abcabcdabcx"
TINY_TRAIN = 6
TOK = CharTokenizer.fit(TINY)  # a b c d x -> 0 1 2 3 4


def _counts(**tokens: int) -> list[int]:
    out = [0] * TOK.vocab_size
    for ch, c in tokens.items():
        out[TOK.vocab.index(ch)] = c
    return out


@pytest.fixture
def tiny():
    return build_strings(TINY, TOK.encode(TINY), 3, TOK.vocab_size, TINY_TRAIN)


def test_tiny_text_strings_and_occurrences(tiny):
    assert tiny.strings == ["abc", "bca", "bcd", "bcx", "cab", "cda", "dab"]
    np.testing.assert_array_equal(tiny.occurrences, [3, 1, 1, 1, 1, 1, 1])


def test_tiny_text_next_counts_over_the_whole_text(tiny):
    expected = [
        _counts(a=1, d=1, x=1),  # abc
        _counts(b=1),  # bca
        _counts(a=1),  # bcd
        _counts(),  # bcx: the last window has no next token
        _counts(c=1),  # cab
        _counts(b=1),  # cda
        _counts(c=1),  # dab
    ]
    np.testing.assert_array_equal(tiny.next_counts, expected)
    np.testing.assert_array_equal(tiny.counts("corpus"), expected)
    assert tiny.members("corpus").all()


def test_tiny_text_train_membership_and_train_counts(tiny):
    # abc, bca, cab lie inside "abcabc"; bcd straddles the split; the rest are validation only
    np.testing.assert_array_equal(tiny.in_train, [True, True, False, False, True, False, False])
    expected = [
        _counts(a=1),  # abc: its 'd' (start 3) and 'x' (start 7) follow in the validation text
        _counts(b=1),  # bca
        _counts(),  # bcd
        _counts(),  # bcx
        _counts(c=1),  # cab
        _counts(),  # cda
        _counts(),  # dab: only in validation
    ]
    np.testing.assert_array_equal(tiny.next_counts_train, expected)
    np.testing.assert_array_equal(tiny.counts("heldout"), expected)
    np.testing.assert_array_equal(tiny.members("heldout"), tiny.in_train)


def test_tiny_text_whole_text_as_train(tiny):
    whole = build_strings(TINY, TOK.encode(TINY), 3, TOK.vocab_size, len(TINY))
    assert whole.in_train.all()
    np.testing.assert_array_equal(whole.next_counts_train, whole.next_counts)


def test_window_keys_order_is_lexicographic_order_of_windows():
    rng = np.random.default_rng(0)
    base, n = 5, 4
    ids = rng.integers(0, base, size=300).astype(np.uint8)
    keys = window_keys(ids, n, base)
    windows = [tuple(int(t) for t in ids[i : i + n]) for i in range(len(ids) - n + 1)]
    assert len(keys) == len(windows) and keys.dtype == np.int64
    # keys are the base-`base` numbers of the windows, so equal windows <-> equal keys, and order agrees
    for i, j in itertools.combinations(range(0, len(windows), 3), 2):
        assert (keys[i] < keys[j]) == (windows[i] < windows[j])
        assert (keys[i] == keys[j]) == (windows[i] == windows[j])
    order = np.argsort(keys, kind="stable")
    assert [windows[i] for i in order] == sorted(windows)
    assert keys[0] == sum(int(d) * base ** (n - 1 - k) for k, d in enumerate(ids[:n]))


def test_window_keys_at_the_int64_limit():
    ids = np.full(12, 64, dtype=np.uint8)
    assert window_keys(ids, 10, 65)[0] == 65**10 - 1  # the paper's case fits
    with pytest.raises(ValueError, match="do not fit in int64"):
        window_keys(ids, 11, 65)


CANDIDATES = [f"s{i:03d}" for i in range(50)]


def test_sample_prompts_is_deterministic_for_a_seed():
    a = sample_prompts(CANDIDATES, 20, 0.5, seed=3)
    b = sample_prompts(CANDIDATES, 20, 0.5, seed=3)
    assert a == b
    c = sample_prompts(CANDIDATES, 20, 0.5, seed=4)
    assert c["string"] != a["string"]


@pytest.mark.parametrize("n_prompts, fraction, n_tune", [(20, 0.5, 10), (10, 0.3, 3), (20, 0.0, 0), (20, 1.0, 20)])
def test_sample_prompts_are_distinct_and_split_by_tune_fraction(n_prompts, fraction, n_tune):
    out = sample_prompts(CANDIDATES, n_prompts, fraction, seed=0)
    assert out["prompt_id"] == list(range(n_prompts))
    assert len(out["string"]) == len(set(out["string"])) == n_prompts
    assert set(out["string"]) <= set(CANDIDATES)
    assert out["split"] == ["tune"] * n_tune + ["eval"] * (n_prompts - n_tune)


def test_sample_prompts_caps_at_the_number_of_candidates():
    out = sample_prompts(CANDIDATES[:7], 100, 0.5, seed=0)
    assert sorted(out["string"]) == CANDIDATES[:7]
    assert out["prompt_id"] == list(range(7))
    assert len(out["split"]) == 7 and out["split"].count("tune") == round(0.5 * 7)


def test_save_load_strings_round_trip(tmp_path, tiny):
    path = tmp_path / "strings.parquet"
    save_strings(path, tiny)
    back = load_strings(path, TOK.vocab_size)
    assert back.strings == tiny.strings
    for name in ("occurrences", "next_counts", "in_train", "next_counts_train"):
        np.testing.assert_array_equal(getattr(back, name), getattr(tiny, name))
    assert back.in_train.dtype == bool
    assert back.next_counts.shape == (len(tiny), TOK.vocab_size)
    with pytest.raises(ValueError, match="next_counts"):
        load_strings(path, TOK.vocab_size + 1)  # another vocabulary: list width differs


def test_heldout_candidates():
    assert heldout_candidates("dabcx", 3) == ["abc", "bcx", "dab"]
    assert heldout_candidates("aaaaa", 2) == ["aa"]
    assert heldout_candidates("abc", 3) == ["abc"]
    assert heldout_candidates("ab", 3) == []
    text = "the cat sat on the mat"
    cands = heldout_candidates(text, 4)
    assert cands == sorted(set(cands))
    assert set(cands) == {text[i : i + 4] for i in range(len(text) - 3)}


def test_heldout_regions_by_hand():
    # cut at 0.5 * 12 = 6: "xabcab" | "cabyzz"
    text = "xabcabcabyzz"
    tune, held = heldout_regions(text, 3, 0.5)
    # starts 0..3 lie before the cut (xab abc bca cab), 4..5 across it (abc bca), 6..9 after (cab aby byz yzz)
    assert tune == ["xab"]  # abc, bca also straddle the cut; cab also occurs after it
    assert held == ["aby", "byz", "yzz"]


def occupied(text, strings, n):
    """Character positions covered by any occurrence of any of ``strings`` in ``text``."""
    wanted = set(strings)
    covered = np.zeros(len(text), dtype=bool)
    for i in range(len(text) - n + 1):
        if text[i : i + n] in wanted:
            covered[i : i + n] = True
    return covered


def test_heldout_evaluation_prompts_share_no_position_with_tuning_prompts(corpus_path):
    text = corpus_path.read_text(encoding="utf-8")[:120_000]  # the test preset's slice
    val = text[int(0.9 * len(text)):]
    tok = CharTokenizer.fit(corpus_path.read_text(encoding="utf-8"))
    ids = tok.encode(text)
    table = build_strings(text, ids, N, tok.vocab_size, int(0.9 * len(ids)))
    prompts = prompt_sets(table, val, N, 1000, 0.5, seed=0)["heldout"]
    tune = [s for s, split in zip(prompts["string"], prompts["split"]) if split == "tune"]
    held = [s for s, split in zip(prompts["string"], prompts["split"]) if split == "eval"]
    assert len(tune) == len(held) == 500 and not set(tune) & set(held)
    overlapping = [s for s in held if (occupied(val, [s], N) & occupied(val, tune, N)).any()]
    assert overlapping == [], f"{len(overlapping)} of {len(held)} evaluation prompts overlap tuning prompts"


def test_sample_split_prompts_draws_each_split_from_its_candidates():
    out = sample_split_prompts(CANDIDATES[:20], CANDIDATES[20:], 10, 0.3, seed=1)
    assert out["split"] == ["tune"] * 3 + ["eval"] * 7
    assert set(out["string"][:3]) <= set(CANDIDATES[:20]) and set(out["string"][3:]) <= set(CANDIDATES[20:])
    assert out["prompt_id"] == list(range(10))
    assert out == sample_split_prompts(CANDIDATES[:20], CANDIDATES[20:], 10, 0.3, seed=1)
    capped = sample_split_prompts(CANDIDATES[:2], CANDIDATES[20:], 10, 0.5, seed=1)
    assert capped["split"] == ["tune"] * 2 + ["eval"] * 5


def test_prompt_shards_cover_every_prompt_once():
    shards = [prompt_shard(10, 3, k) for k in (1, 2, 3)]
    assert [s.tolist() for s in shards] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    with pytest.raises(ValueError, match="shards empty"):
        prompt_shard(2, 3, 1)
    with pytest.raises(ValueError, match="not one of 1..3"):
        prompt_shard(10, 3, 0)


# --- the paper's own prompt set (method.md §12) ---


def test_paper_prompts_are_the_papers_draw(full):
    text, ids, _, table = full
    prompts = paper_prompts(text, ids, N, 65, 20_000, seed=1337)
    strings = prompts["string"]
    assert strings[:5] == ["is dreams,", "by present", "s eyes may", "eart of ho", " man, as I"]
    assert strings[40] == "hing tremb" and strings[57] == "And only l"  # the case studies' prompt indices
    assert prompts["prompt_id"] == list(range(20_000)) and prompts["split"] == ["eval"] * 20_000
    assert len(set(strings)) == 20_000 and set(strings) <= set(table.strings)
    # a smaller preset takes the front of the same permutation
    assert paper_prompts(text, ids, N, 65, 500, seed=1337)["string"] == strings[:500]
    with pytest.raises(ValueError, match="858923 unique strings of length 10; lower the preset's analysis.paper_prompts"):
        paper_prompts(text, ids, N, 65, 858_924, seed=1337)


def test_first_occurrence_order_by_hand():
    # TINY = "abcabcdabcx": abc@0 bca@1 cab@2 (abc@3 again) bcd@4 cda@5 dab@6 (abc@7) bcx@8
    starts = first_occurrence_order(TOK.encode(TINY), 3, TOK.vocab_size)
    assert [TINY[i : i + 3] for i in starts] == ["abc", "bca", "cab", "bcd", "cda", "dab", "bcx"]
    assert starts.tolist() == [0, 1, 2, 4, 5, 6, 8]


def test_paper_permutation_is_torch_randperm_after_manual_seed():
    import torch

    torch.manual_seed(1337)
    expected = torch.randperm(1000)[:50].numpy()
    state = torch.get_rng_state()
    np.testing.assert_array_equal(paper_permutation(1000, 50, 1337), expected)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is left alone


def test_paper_mode_searches_the_whole_text_and_borrows_the_corpus_tuning(tiny):
    np.testing.assert_array_equal(tiny.counts("paper"), tiny.next_counts)
    assert tiny.members("paper").all()
    assert MODES == ("corpus", "heldout", "paper") and TUNING_MODES == ("corpus", "heldout")
    assert TUNED_WITH["paper"] == "corpus"
    with pytest.raises(ValueError, match="unknown prompt mode 'papers'"):
        tiny.counts("papers")


def test_the_string_table_can_be_read_for_a_sample_of_its_rows(tmp_path):
    from tinylens.core.strings import count_strings

    ids = np.random.default_rng(0).integers(0, 4, 500)
    table = build_strings("".join("abcd"[i] for i in ids), ids, 4, 4, n_train=450)
    save_strings(tmp_path / "s.parquet", table)
    rows = np.array([3, 17, 40])
    sample = load_strings(tmp_path / "s.parquet", 4, rows=rows)
    assert count_strings(tmp_path / "s.parquet") == len(table) and len(sample) == 3
    assert sample.strings == [table.strings[i] for i in rows]
    np.testing.assert_array_equal(sample.next_counts, table.next_counts[rows])
    np.testing.assert_array_equal(sample.next_counts_train, table.next_counts_train[rows])
    np.testing.assert_array_equal(sample.in_train, table.in_train[rows])


def test_the_strings_and_their_train_flags_read_without_the_counts(tmp_path):
    from tinylens.core.strings import load_string_names

    ids = np.random.default_rng(1).integers(0, 4, 300)
    table = build_strings("".join("abcd"[i] for i in ids), ids, 4, 4, n_train=250)
    save_strings(tmp_path / "s.parquet", table)
    strings, in_train = load_string_names(tmp_path / "s.parquet", 4)
    assert strings == table.strings and in_train.dtype == bool
    np.testing.assert_array_equal(in_train, table.in_train)
