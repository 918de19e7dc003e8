"""The words every family's findings are written with: :func:`get` reads a key path of a metrics document and
names the key when it is missing (:class:`MissingMetric`); :func:`num`, :func:`span` and :func:`percent` format
numbers the same way in every sentence; :func:`stated` turns one test's record (``tinylens.measures``:
``mean_test``, ``share_test``, ``ratio_test``) into its verdict words with the numbers that decided them, so
words and p-values cannot disagree, and :func:`disagreements` finds sentences where they do; :func:`block`
and :data:`CONVENTION` count blocks, layers and heads for people; :func:`moved` is what a removed entry point
says. The ground floor of the findings and the entry points: the families' summary modules,
:mod:`tinylens.findings` and the entry points import it, and it imports nothing of the project.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence


class MissingMetric(LookupError):
    """A key a family's sentences need is not in its metrics file."""


def get(document: object, *path: str | int):
    """``document[path[0]][path[1]]...``, or :class:`MissingMetric` naming the key path that is missing."""
    node = document
    for i, key in enumerate(path):
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            raise MissingMetric(f"no key {'.'.join(str(k) for k in path[:i + 1])}") from None
    return node


def num(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (integers as they are, with thousands separators)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 10 ** (digits - 1):
        return f"{int(value):,}"
    return f"{float(value):.{digits}g}"


def span(values: Sequence[float], digits: int = 3) -> str:
    """``lo-hi`` of some values, or the one value where they agree at this precision."""
    lo, hi = num(min(values), digits), num(max(values), digits)
    return lo if lo == hi else f"{lo} to {hi}"


def percent(share: float, digits: int = 2) -> str:
    return f"{num(100 * share, digits)}%"


def trained(training: Mapping) -> str:
    """How a model was trained, for a sentence that compares it with another: ``seed 1337, 2,000 training steps,
    validation loss 1.81`` from ``tinylens.core.training_log.training_digest``."""
    return (f"seed {training['seed']}, {num(training['steps'])} training steps, validation loss "
            f"{num(training['val_loss'])}")


# --- one convention for people (every sentence, figure and table a reader sees) ------------------------------

#: The first line of every findings document: how blocks, layers and heads are counted, and what "source" and
#: "seed" mean.
CONVENTION = ("Blocks, layers and heads are counted from 1 in every sentence, figure and table meant for people, "
              "as the paper counts them (block 1 is the first); the metrics files and their keys count from 0. "
              "\"Source 000\" to \"source 004\" are the source documents (docs/method.md); \"seed 1337\" is a "
              "random seed.")


def block(index: int) -> int:
    """The number people read for a 0-based block, layer or head index of the metrics: ``index + 1``."""
    return int(index) + 1


def listing(items: Sequence[object]) -> str:
    """``1``, ``1 and 2``, ``1, 2 and 3``; ``none`` for no items."""
    items = [str(i) for i in items]
    if not items:
        return "none"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- a test's verdict in words, with the numbers that decided it ---------------------------------------------

#: The two-sided level of every verdict the findings state; a test record's 95% interval excludes its null
#: exactly when its p is below it.
LEVEL = 0.05
#: What a sentence may say where its test does not reject the null ...
SAME_WORDS = ("no different", "cannot be told")
#: ... and where it does (one of these, chosen by the direction).
DIFFERENT_WORDS = ("longer", "shorter", "larger", "smaller", "above", "below", "worse", "better", "rises", "falls",
                   "dominated", "not dominated", "differs", "aligned", "opposed", "same direction",
                   "not the same direction")


def estimate(test: Mapping) -> float:
    """A test record's estimate: its ``mean``, ``share`` or ``ratio``."""
    for key in ("mean", "share", "ratio"):
        if key in test:
            return get(test, key)
    raise MissingMetric(f"a test record without mean, share or ratio: {sorted(test)}")


def direction(test: Mapping) -> str:
    """``above``/``below`` where the test rejects its null at :data:`LEVEL`, else ``same``: from its p and
    estimate (never from a stored verdict), so the words follow the quoted numbers."""
    p = get(test, "p")
    if p is None or p >= LEVEL:
        return "same"
    return "above" if estimate(test) > get(test, "null") else "below"


def verdict(test: Mapping, above: str, below: str, same: str = "no different") -> str:
    """The words of ``test``'s verdict: ``above``, ``below`` or ``same`` by :func:`direction`."""
    for words, allowed in ((above, DIFFERENT_WORDS), (below, DIFFERENT_WORDS), (same, SAME_WORDS)):
        said = _last_phrase(words.lower())
        if said not in allowed:
            raise ValueError(f"verdict words {words!r} do not say one of {allowed} last (tinylens.wording)")
    return {"above": above, "below": below, "same": same}[direction(test)]


def stated(test: Mapping, above: str, below: str, same: str = "no different", what: str | None = None,
           digits: int = 2) -> str:
    """``<verdict> (<what> <estimate>, 95% interval <lo> to <hi>, p = <p>)``: one test's words and numbers.
    ``what`` names the estimate (default: mean, share or ratio, as the record holds)."""
    what = what or next(k for k in ("mean", "share", "ratio") if k in test)
    interval = test.get("ci95")
    inside = f", 95% interval {num(interval[0], digits)} to {num(interval[1], digits)}" if interval else ""
    p = get(test, "p")
    quoted = "p < 1e-300" if p == 0 else f"p = {num(p, 2)}"  # a p below what a float holds is not 0
    return f"{verdict(test, above, below, same)} ({what} {num(estimate(test), digits)}{inside}, {quoted})"


#: A parenthesis that quotes a p-value, and the words before it back to the previous clause's end.
_CLAUSE = re.compile(r"([^;:.()]*)\(([^()]*?\bp = ([-+]?[0-9][0-9.]*(?:e[-+]?[0-9]+)?)[^()]*)\)")
_WORDS = [(w, re.compile(rf"\b{re.escape(w)}\b")) for w in SAME_WORDS + DIFFERENT_WORDS]


def _last_phrase(words: str) -> str | None:
    """The verdict phrase of :data:`SAME_WORDS` or :data:`DIFFERENT_WORDS` said last in ``words`` (of two that end
    together, the longer: "not dominated", not "dominated"); None if none is."""
    hits = [(m.end(), len(w), w) for w, pattern in _WORDS for m in pattern.finditer(words)]
    return max(hits)[2] if hits else None


def disagreements(text: str, level: float = LEVEL) -> list[str]:
    """The verdict clauses of ``text`` whose words and quoted p disagree: the last verdict phrase before a
    parenthesis that quotes p (back to the previous ``;``, ``:`` or ``.``) is one of :data:`SAME_WORDS` while
    p < ``level``, or one of :data:`DIFFERENT_WORDS` while p >= ``level``."""
    found = []
    for match in _CLAUSE.finditer(text):
        said, p = _last_phrase(match.group(1).lower()), float(match.group(3))
        if said is None:
            continue
        if (said in SAME_WORDS) != (p >= level):
            found.append(f"'{said}' with p = {match.group(3)}: {match.group(0).strip()}")
    return found


def grouped(tests: Sequence[tuple[int, Mapping]], above: str, below: str, same: str = "no different",
            what: str | None = None, digits: int = 2, unit: str = "block", preposition: str = "in") -> str:
    """Numbered units (blocks counted for people, :func:`block`) grouped by their test's verdict, in the order
    above, below, same: ``<words> in blocks 1, 5 and 6 (means 0.56 to 1, largest p = 0.003)``; a group of one
    gets its whole clause (:func:`stated`). The largest p of a rejecting group and the smallest of the others
    are quoted, so every quoted p agrees with its words."""
    parts = []
    for side, words in (("above", above), ("below", below), ("same", same)):
        group = [(n, t) for n, t in tests if direction(t) == side]
        if not group:
            continue
        verdict(group[0][1], above, below, same)  # checks the words
        if len(group) == 1:
            n, t = group[0]
            clause = stated(t, above, below, same, what, digits)
            parts.append(clause.replace(" (", f" {preposition} {unit} {n} (", 1))
            continue
        name = what or next(k for k in ("mean", "share", "ratio") if k in group[0][1])
        values = [estimate(t) for _, t in group]
        ps = [get(t, "p") for _, t in group]
        p = max(ps) if side != "same" else min((x for x in ps if x is not None), default=None)
        quoted = f", {'largest' if side != 'same' else 'smallest'} p = {num(p, 2)}" if p is not None else ""
        parts.append(f"{words} {preposition} {unit}s {listing([n for n, _ in group])} ({name}s {span(values, digits)}{quoted})")
    return "; ".join(parts)


def moved(old: str, verb: str) -> int:
    """What a removed entry point (``python -m tinylens.<verb>``, which once did the work) says, rather than
    doing nothing: the verb that replaced it; exit status 2."""
    print(f"{old} is now `tinylens {verb}` (or `python -m tinylens {verb}`); `tinylens --help` lists the verbs",
          file=sys.stderr)
    return 2
