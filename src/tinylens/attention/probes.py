"""Probes for attractors: who speaks, read from the residual stream at every depth (method.md §10).

The play text marks each speech with a ``NAME:`` line after a blank line. A passage is a piece of
one speech with the header dropped and every word of the speaker's own name deleted from it (so a
probe cannot read the name), cut into consecutive chunks of at most ``max_chars`` characters
(the model's context). Its feature at depth ``d`` is the residual stream averaged over the
passage's positions. A logistic-regression probe (scikit-learn) is trained on passages from the
training text and scored on passages from the validation text; beside it a nearest-class-mean
classifier (the attractor reading: each speaker a point the states settle near), a probe trained
on shuffled labels, and chance: the majority class's share of the scored passages for accuracy,
1 / speakers for balanced accuracy (the mean of the per-speaker recalls; the speakers' shares
differ between the two texts, so this is the number that compares depths fairly).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from tinylens.attention.schemas import PROBE_SCHEMA
from tinylens.attention.trajectories import depth_residuals
from tinylens.model import Transformer

#: A speech: a blank line (or the start of the text), ``NAME:`` alone on its line, then text up to
#: the next blank line.
SPEECH = re.compile(r"(?:\A|\n\n)([A-Z][A-Za-z' ]*[A-Za-z]):\n(.+?)(?=\n\n|\Z)", re.S)


@dataclass(frozen=True)
class Passage:
    speaker: str
    text: str


def speeches(text: str) -> list[tuple[str, str]]:
    """``(speaker, speech)`` for every ``NAME:`` block of the text, in order."""
    return [(m.group(1), m.group(2)) for m in SPEECH.finditer(text)]


def remove_name(text: str, name: str) -> str:
    """Delete every whole-word occurrence of each word of ``name`` from ``text``, ignoring case
    (a possessive's ``'s`` stays).

    >>> remove_name("Good Kate; Kate of Kate Hall, KATE!", "KATE")
    'Good ; of  Hall, !'
    """
    for word in re.findall(r"[A-Za-z']+", name):
        text = re.sub(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", "", text, flags=re.I)
    return text


def speaker_counts(text: str) -> Counter:
    return Counter(speaker for speaker, _ in speeches(text))


def choose_speakers(train_text: str, val_text: str, n: int, min_speeches: int) -> list[str]:
    """The ``n`` speakers with the most speeches (both texts together) among those with at least
    ``min_speeches`` in each text; ties broken by name. Raises ValueError when fewer than two qualify."""
    train, val = speaker_counts(train_text), speaker_counts(val_text)
    both = [s for s in train if train[s] >= min_speeches and val[s] >= min_speeches]
    chosen = sorted(both, key=lambda s: (-(train[s] + val[s]), s))[:n]
    if len(chosen) < 2:
        raise ValueError(f"only {len(chosen)} speakers have at least {min_speeches} speeches in both the training and "
                         "the validation text; lower the preset's attention.probe.min_speeches or use more of the corpus")
    return chosen


def passages(text: str, speakers: Sequence[str], max_chars: int, min_chars: int) -> list[Passage]:
    """Every speech of ``speakers`` in ``text``, name removed, cut into chunks of ``max_chars``
    characters; chunks shorter than ``min_chars`` are dropped."""
    wanted = set(speakers)
    out = []
    for speaker, speech in speeches(text):
        if speaker not in wanted:
            continue
        body = remove_name(speech, speaker)
        for start in range(0, len(body), max_chars):
            chunk = body[start : start + max_chars]
            if len(chunk) >= min_chars:
                out.append(Passage(speaker, chunk))
    return out


def pooled_features(model: Transformer, sequences: Sequence[np.ndarray], batch_size: int = 256) -> np.ndarray:
    """The residual stream averaged over each sequence's positions, at every depth.

    sequences: token-id arrays of at most ``block_size`` tokens -> ``[depth n d_model]`` float32.
    Sequences are padded on the right: the attention is causal, so padding never reaches a real
    position, and the mean is over real positions only.
    """
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(sequences), batch_size):
        batch = sequences[start : start + batch_size]
        lengths = torch.tensor([len(s) for s in batch], device=device)
        tokens = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long, device=device)
        for i, s in enumerate(batch):
            tokens[i, : len(s)] = torch.as_tensor(np.asarray(s, dtype=np.int64), device=device)
        with torch.no_grad():
            resid = depth_residuals(model, tokens)  # [depth batch pos d_model]
        real = (torch.arange(tokens.shape[1], device=device)[None, :] < lengths[:, None]).to(resid.dtype)
        out.append(((resid * real[None, :, :, None]).sum(2) / lengths[None, :, None]).float().cpu())
    return torch.cat(out, dim=1).numpy()


def majority_share(labels: Sequence) -> float:
    """Share of the most frequent label: the accuracy of always guessing it (method.md's chance)."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    return float(counts.max() / counts.sum())


#: The classifiers :func:`probe_accuracies` scores, in the order figures and tables list them.
CLASSIFIERS = ("logistic", "nearest_class_mean", "shuffled_labels")


def probe_accuracies(train_x: np.ndarray, train_y: Sequence, test_x: np.ndarray, test_y: Sequence,
                     c: float = 1.0, seed: int = 0, shuffles: int = 2, max_iter: int = 2000) -> dict[str, dict[str, float]]:
    """Score each classifier of :data:`CLASSIFIERS` on the test passages.

    ``logistic``: multinomial logistic regression (scikit-learn, inverse regularisation ``c``,
    classes weighted inversely to their training frequency, since the speakers' shares differ
    between the two texts); ``nearest_class_mean``: each class's mean training feature, Euclidean
    distance; ``shuffled_labels``: the logistic probe trained on ``shuffles`` permutations of the
    training labels (a control that stays near chance unless the evaluation leaks the label),
    mean and standard deviation over the permutations. All on features standardised with the
    training passages' statistics. Returns ``{classifier: {"accuracy", "balanced_accuracy",
    "accuracy_std", "balanced_accuracy_std"}}`` (std 0 where nothing is random) and ``"chance"``:
    accuracy = the majority share of the test labels, balanced accuracy = 1 / classes.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, balanced_accuracy_score
    from sklearn.neighbors import NearestCentroid
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    missing = sorted(set(test_y) - set(train_y))
    if missing:
        raise ValueError(f"classes {missing} have test passages but no training passages")

    def logistic():  # newton-cg: the same L2-regularised multinomial optimum as lbfgs, in ~8 steps instead of ~100
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter, class_weight="balanced",
                                                                  solver="newton-cg"))

    def score(model) -> tuple[float, float]:
        predicted = model.predict(test_x)
        return float(accuracy_score(test_y, predicted)), float(balanced_accuracy_score(test_y, predicted))

    def entry(values: list[tuple[float, float]]) -> dict[str, float]:
        acc, bal = np.array(values).T
        return {"accuracy": float(acc.mean()), "balanced_accuracy": float(bal.mean()),
                "accuracy_std": float(acc.std()), "balanced_accuracy_std": float(bal.std())}

    rng = np.random.default_rng(seed)
    return {
        "logistic": entry([score(logistic().fit(train_x, train_y))]),
        "nearest_class_mean": entry([score(make_pipeline(StandardScaler(), NearestCentroid()).fit(train_x, train_y))]),
        "shuffled_labels": entry([score(logistic().fit(train_x, rng.permutation(train_y))) for _ in range(shuffles)]),
        "chance": entry([(majority_share(test_y), 1.0 / len(np.unique(train_y)))]),
    }


def probe_by_depth(train_features: np.ndarray, train_y: Sequence, test_features: np.ndarray, test_y: Sequence,
                   c: float = 1.0, seed: int = 0, shuffles: int = 2, progress: bool = False) -> dict[str, list]:
    """:func:`probe_accuracies` at every depth of ``[depth n d_model]`` features: the columns of
    :data:`PROBE_SCHEMA` (a progress bar over depths on stderr if ``progress``)."""
    columns: dict[str, list] = {k: [] for k in PROBE_SCHEMA.columns}
    for depth in tqdm(range(len(train_features)), desc="probes by depth", disable=not progress):
        scores = probe_accuracies(train_features[depth], train_y, test_features[depth], test_y, c=c, seed=seed,
                                  shuffles=shuffles)
        for name, values in scores.items():
            columns["depth"].append(depth)
            columns["classifier"].append(name)
            for key, value in values.items():
                columns[key].append(value)
    return columns
