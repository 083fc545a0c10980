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
    from job.control import ControlError
    from job.control.client import open_plane
    from job.control.registry import default_registry_url
    from job.text import safe_text
    from tui.app import DaggersApp

    try:
        plane = open_plane(os.environ.get("DAGGERS_USER") or None,
                           os.environ.get("DAGGERS_REGISTRY") or default_registry_url(None))
        plane.whoami()
    except ControlError as exc:
        print(safe_text(f"{exc.title}: {exc.message}", multiline=True), file=sys.stderr)
        return 2
    DaggersApp(plane, alerts_url=os.environ.get("DAGGERS_ALERTS_STORE") or None).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
