import numpy as np
import pytest

from tinylens.core.corpus import (
    CharTokenizer,
    CorpusError,
    fetch_corpus,
    load_ids,
    prepare_corpus,
    save_ids,
    sha256_of,
    split_ids,
)

CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


@pytest.mark.parametrize("as_url", [False, True])
def test_fetch_from_a_path_or_file_url_verifies_the_checksum(tmp_path, corpus_path, as_url):
    source = corpus_path.as_uri() if as_url else str(corpus_path)
    dest = fetch_corpus(source, tmp_path / "corpus.txt", CORPUS_SHA256)
    assert sha256_of(dest) == CORPUS_SHA256
    assert len(dest.read_text()) == 1_115_394


def test_checksum_mismatch_is_an_error_and_leaves_nothing(tmp_path, corpus_path):
    dest = tmp_path / "corpus.txt"
    with pytest.raises(CorpusError, match="checksum mismatch.*expected sha256 0{64}"):
        fetch_corpus(str(corpus_path), dest, "0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_failed_download_says_how_to_run_offline(tmp_path):
    # Port 9 (discard) on loopback refuses the connection at once.
    with pytest.raises(CorpusError, match="could not fetch.*--config corpus_url=/path/to/input.txt"):
        fetch_corpus("http://127.0.0.1:9/input.txt", tmp_path / "corpus.txt", CORPUS_SHA256, timeout=5)
    with pytest.raises(CorpusError, match="could not fetch"):
        fetch_corpus(str(tmp_path / "nope.txt"), tmp_path / "corpus.txt", CORPUS_SHA256)
    assert list(tmp_path.iterdir()) == []


def test_tokenizer_is_sorted_characters_and_round_trips(tmp_path):
    tok = CharTokenizer.fit("hello world")
    assert tok.vocab == " dehlorw"
    ids = tok.encode("hello")
    assert ids.dtype == np.uint8 and tok.decode(ids) == "hello"
    tok.save(tmp_path / "tok.json")
    assert CharTokenizer.load(tmp_path / "tok.json") == tok
    with pytest.raises(ValueError, match="not in the tokenizer"):
        tok.encode("hello!")


def test_bad_tokenizer_file_is_reported(tmp_path):
    (tmp_path / "tok.json").write_text('{"kind": "bpe"}')
    with pytest.raises(ValueError, match="tok.json is unreadable"):
        CharTokenizer.load(tmp_path / "tok.json")


def test_split_is_first_ninety_percent(corpus_path):
    prepared = prepare_corpus(corpus_path.read_text(), None, 0.9)
    assert prepared.tokenizer.vocab_size == 65
    assert len(prepared.train) == int(0.9 * 1_115_394) and len(prepared.train) + len(prepared.val) == 1_115_394
    assert prepared.tokenizer.decode(prepared.train[:9]) == "First Cit"
    train, val = split_ids(np.arange(10, dtype=np.uint8), 0.9)
    assert train.tolist() == list(range(9)) and val.tolist() == [9]


def test_a_slice_keeps_the_full_vocabulary(corpus_path):
    prepared = prepare_corpus(corpus_path.read_text(), 20_000, 0.9)
    assert prepared.tokenizer.vocab_size == 65
    assert prepared.stats["used_chars"] == 20_000 and len(prepared.train) == 18_000


def test_ids_round_trip_and_truncation_is_detected(tmp_path):
    ids = np.arange(200, dtype=np.uint8)
    save_ids(tmp_path / "ids.npy", ids)
    assert np.array_equal(load_ids(tmp_path / "ids.npy"), ids)
    raw = (tmp_path / "ids.npy").read_bytes()
    (tmp_path / "ids.npy").write_bytes(raw[:-50])
    with pytest.raises(ValueError, match="truncated"):
        load_ids(tmp_path / "ids.npy")
