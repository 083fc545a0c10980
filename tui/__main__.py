"""``python -m tui``: the operator console (``daggers tui`` checks the user, then runs this).

Reads ``DAGGERS_SERVER`` (or a stored ``daggers login``) to go through a server, else ``DAGGERS_USER``
(default: the OS user) and ``DAGGERS_REGISTRY``; optionally ``DAGGERS_ALERTS_STORE``.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    """Open the console through the server, or as ``$DAGGERS_USER`` over ``$DAGGERS_REGISTRY``; return the
    exit status."""
    from job.common.optional import require
    from job.common.text import safe_text
    from job.control.client import open_plane
    from job.control.registry import default_registry_url
    from job.errors import DaggerError

    try:
        require("textual", "tui", needed_by="the console")
        require("textual_plotext", "tui", needed_by="the console")
        plane = open_plane(
            os.environ.get("DAGGERS_USER") or None,
            os.environ.get("DAGGERS_REGISTRY") or default_registry_url(None),
        )
        plane.whoami()
    except DaggerError as exc:
        print(safe_text(exc.state_text(), multiline=True), file=sys.stderr)
        return 2
    from tui.app import DaggersApp

    DaggersApp(plane, alerts_url=os.environ.get("DAGGERS_ALERTS_STORE") or None).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
