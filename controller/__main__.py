"""``python -m controller``: run the Stateful JobSet controller (``--help`` lists every flag).

``python -m controller render FILE`` prints the objects it would create for a JobSet, offline.
"""

from __future__ import annotations

import sys

from controller.app import main
from controller.config import Config
from controller.jobset.setup import setup
from controller.runtime.manager import Manager


def _setup(manager: Manager[Config]) -> None:
    """Register the controllers this process runs."""
    setup(manager)


if __name__ == "__main__":
    if sys.argv[1:2] == ["render"]:
        from controller.render import main as render

        sys.exit(render(sys.argv[2:]))
    sys.exit(main(sys.argv[1:], _setup))
