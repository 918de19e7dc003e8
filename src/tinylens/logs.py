"""Send a job's log lines and progress bars to its Snakemake ``log:`` file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def log_to(path: str | Path) -> Iterator[logging.Logger]:
    """Route ``logging`` and ``sys.stderr`` (tqdm bars) to ``path`` for the duration.

    The file is appended to, so an interrupted and resumed job keeps both
    attempts. An exception is logged in full there, and its one-line message
    is also printed on the console so the user sees what went wrong without
    opening the log.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    console = sys.stderr
    with open(path, "a", buffering=1) as stream:
        sys.stderr = stream
        logging.basicConfig(level=logging.INFO, stream=stream, force=True,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logger = logging.getLogger("tinylens")
        try:
            yield logger
        except Exception as err:
            logger.exception("job failed")
            print(f"tinylens: {type(err).__name__}: {err}\n(full log: {path})", file=console)
            raise
        finally:
            sys.stderr = console
            logging.basicConfig(stream=console, force=True)
