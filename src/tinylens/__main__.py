"""``python -m tinylens COMMAND``: the same as the ``tinylens`` command."""

from tinylens.cli import main

raise SystemExit(main())
