"""``python -m controller``: run the Stateful JobSet controller (``--help`` lists every flag)."""

from __future__ import annotations

import sys

from controller.app import main
from controller.runtime.manager import Manager


def _setup(manager: Manager) -> None:
    """Register the controllers this process runs."""
    # The JobSet controller is registered here once it exists (see docs/development.md).


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], _setup))
