"""The ``tinylens`` command: ``tinylens explain PROMPT`` (tinylens.explain)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = {"explain": "explain a prompt from a finished run's artifacts (tinylens.explain)"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        usage = "\n".join(f"  {name:10} {what}" for name, what in COMMANDS.items())
        print(f"usage: tinylens COMMAND [ARGS]  (tinylens COMMAND --help)\ncommands:\n{usage}", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    from tinylens.explain import main as explain_main

    return explain_main(argv[1:])
