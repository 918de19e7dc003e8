"""Send a job's log lines and progress bars to its Snakemake ``log:`` file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def log_to(path: str | Path) -> Iterator[logging.Logger]:
    """Route ``logging`` and ``sys.stderr`` (tqdm bars) to ``path`` for the duration.

    The file is appended to (UTF-8), so an interrupted and resumed job keeps
    both attempts. An exception is logged in full there, and its one-line
    message is also printed on the console so the user sees what went wrong
    without opening the log. Handlers configured by the caller are left in
    place: one handler is added to the root logger for the duration and
    removed afterwards, with the root level restored.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    console = sys.stderr
    root = logging.getLogger()
    with open(path, "a", buffering=1, encoding="utf-8") as stream:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(FORMAT))
        level = root.level
        root.addHandler(handler)
        if root.getEffectiveLevel() > logging.INFO:
            root.setLevel(logging.INFO)
        sys.stderr = stream
        logger = logging.getLogger("tinylens")
        try:
            yield logger
        except Exception as err:
            logger.exception("job failed")
            print(f"tinylens: {type(err).__name__}: {err}\n(full log: {path})", file=console)
            raise
        finally:
            sys.stderr = console
            root.removeHandler(handler)
            root.setLevel(level)
