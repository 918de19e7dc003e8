"""The words every family's findings are written with: :func:`get` reads a key path of a metrics document and
names the key when it is missing (:class:`MissingMetric`); :func:`num`, :func:`span` and :func:`percent` format
numbers the same way in every sentence; :func:`moved` is what a removed entry point says. The ground floor of
the findings and the entry points: the families' summary modules, :mod:`tinylens.findings` and the entry points
import it, and it imports nothing of the project.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence


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


def moved(old: str, verb: str) -> int:
    """What a removed entry point (``python -m tinylens.<verb>``, which once did the work) says, rather than
    doing nothing: the verb that replaced it; exit status 2."""
    print(f"{old} is now `tinylens {verb}` (or `python -m tinylens {verb}`); `tinylens --help` lists the verbs",
          file=sys.stderr)
    return 2
