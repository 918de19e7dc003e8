"""``tinylens publish``: record a finished run in dvc.lock, push its artifacts, commit
(:func:`tinylens.restore.publish`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tinylens.restore import RestoreError, publish


def run(args: argparse.Namespace) -> int:
    """``tinylens publish`` (its arguments: :mod:`tinylens.cli`); exit status 1 when the run cannot be published."""
    try:
        print(publish(args.preset, Path.cwd(), args.config, push=not args.no_push, message=args.message))
    except RestoreError as err:
        print(f"tinylens publish: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from tinylens.wording import moved

    sys.exit(moved("python -m tinylens.publish", "publish"))
