"""``python -m tinylens.publish``: the same as ``tinylens-publish`` (see :mod:`tinylens.restore`)."""

import sys

from tinylens.restore import publish_main

if __name__ == "__main__":
    sys.exit(publish_main())
