"""Corpus fetch with checksum, the character tokenizer and the train/validation split (method.md §0)."""

from __future__ import annotations

import hashlib
import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinylens.atomic import atomic_path, write_json

#: Token ids fit in one byte for any character vocabulary up to 256 symbols.
TOKEN_DTYPE = np.uint8


class CorpusError(RuntimeError):
    """The corpus could not be fetched or failed its checksum."""


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_source(source: str, dest: Path, timeout: float) -> None:
    """Copy ``source`` (https/http/file URL or local path) to ``dest``."""
    scheme = urllib.parse.urlparse(source).scheme
    if scheme in ("http", "https", "file"):
        with urllib.request.urlopen(source, timeout=timeout) as response, open(dest, "wb") as out:
            shutil.copyfileobj(response, out)
    else:
        shutil.copyfile(Path(source).expanduser(), dest)


def fetch_corpus(source: str, dest: str | Path, sha256: str, timeout: float = 60.0) -> Path:
    """Fetch the corpus from ``source`` to ``dest`` and verify its sha256.

    The file appears under ``dest`` only when complete and verified: a failed
    download or a checksum mismatch raises :class:`CorpusError` and leaves
    nothing behind.
    """
    dest = Path(dest)
    offline_hint = (
        "To run offline, point the workflow at a local copy of the corpus: "
        "snakemake --cores all --config corpus_url=/path/to/input.txt "
        "(a path or a file:// URL; its sha256 must be corpus_sha256)."
    )
    with atomic_path(dest) as tmp:
        try:
            _copy_source(source, tmp, timeout)
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise CorpusError(f"could not fetch the corpus from {source!r}: {err}. {offline_hint}") from None
        actual = sha256_of(tmp)
        if actual != sha256.lower():
            raise CorpusError(
                f"checksum mismatch for the corpus from {source!r}: expected sha256 {sha256}, "
                f"got {actual}. The file was not kept. Check that corpus_url points at the "
                "TinyShakespeare input.txt; if you deliberately use another text, set corpus_sha256 to its sha256."
            )
    return dest


@dataclass(frozen=True)
class CharTokenizer:
    """Vocabulary = the sorted distinct characters of the text; token id = index in it."""

    vocab: str

    @classmethod
    def fit(cls, text: str) -> CharTokenizer:
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> np.ndarray:
        lookup = {ch: i for i, ch in enumerate(self.vocab)}
        try:
            return np.fromiter((lookup[ch] for ch in text), dtype=TOKEN_DTYPE, count=len(text))
        except KeyError as err:
            raise ValueError(f"character {err.args[0]!r} is not in the tokenizer's vocabulary") from None

    def decode(self, ids) -> str:
        return "".join(self.vocab[int(i)] for i in ids)

    def save(self, path: str | Path) -> None:
        write_json(path, {"kind": "char", "vocab": list(self.vocab)})

    @classmethod
    def load(cls, path: str | Path) -> CharTokenizer:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if data.get("kind") != "char" or not isinstance(data.get("vocab"), list):
                raise ValueError("expected {'kind': 'char', 'vocab': [characters]}")
            vocab = "".join(data["vocab"])
            if len(vocab) != len(data["vocab"]) or len(set(vocab)) != len(vocab):
                raise ValueError("vocab must be distinct single characters")
        except (OSError, ValueError, AttributeError) as err:
            raise ValueError(
                f"tokenizer file {path} is unreadable ({err}); rerun the tokenize rule or `dvc pull`"
            ) from None
        return cls(vocab)


def split_ids(ids: np.ndarray, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """First ``train_fraction`` of the ids train, the rest validation."""
    n_train = int(train_fraction * len(ids))
    return ids[:n_train], ids[n_train:]


def save_ids(path: str | Path, ids: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(ids, dtype=TOKEN_DTYPE), allow_pickle=False)


def load_ids(path: str | Path) -> np.ndarray:
    try:
        ids = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(
            f"token file {path} is truncated or not a .npy array ({err}); rerun the tokenize rule"
        ) from None
    if ids.dtype != TOKEN_DTYPE or ids.ndim != 1:
        raise ValueError(f"token file {path} holds {ids.dtype} {ids.shape}, expected a 1-D uint8 array")
    return ids


def unigram_entropy(ids: np.ndarray, vocab_size: int) -> float:
    """Entropy in nats of the token frequency distribution: the loss of a model that ignores context."""
    from tinylens.measures import entropy, unigram  # imported here: the figure jobs read the tokenizer without torch

    return float(entropy(unigram(ids, vocab_size)))


@dataclass(frozen=True)
class PreparedCorpus:
    tokenizer: CharTokenizer
    train: np.ndarray
    val: np.ndarray
    stats: dict


def prepare_corpus(text: str, corpus_chars: int | None, train_fraction: float) -> PreparedCorpus:
    """Tokenizer from the whole text (so every preset shares the 65-symbol vocabulary),
    then the first ``corpus_chars`` characters (all when None) split into train/validation."""
    tokenizer = CharTokenizer.fit(text)
    used = text if corpus_chars is None else text[:corpus_chars]
    ids = tokenizer.encode(used)
    train, val = split_ids(ids, train_fraction)
    stats = {
        "corpus_chars": len(text),
        "used_chars": len(used),
        "vocab_size": tokenizer.vocab_size,
        "train_tokens": int(len(train)),
        "val_tokens": int(len(val)),
        # The loss of a model that ignores context: trained models must beat it.
        "unigram_entropy_nats": round(unigram_entropy(ids, tokenizer.vocab_size), 6),
    }
    return PreparedCorpus(tokenizer, train, val, stats)
