"""``python -m tui``: the operator console (``daggers tui`` checks the user, then runs this).

Reads ``DAGGERS_USER``, ``DAGGERS_REGISTRY`` and, optionally, ``DAGGERS_ALERTS_STORE`` from the
environment.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    """Open the console as ``$DAGGERS_USER`` over ``$DAGGERS_REGISTRY``; return the exit status."""
    from job.control import ControlError, ControlPlane, Registry
    from job.control.registry import default_registry_url
    from tui.app import DaggersApp

    user = os.environ.get("DAGGERS_USER")
    if not user:
        print("who are you? set DAGGERS_USER (or run `daggers tui --user NAME`)", file=sys.stderr)
        return 2
    try:
        plane = ControlPlane(Registry(os.environ.get("DAGGERS_REGISTRY") or default_registry_url(None)), user)
        plane.whoami()
    except ControlError as exc:
        print(f"{exc.title}: {exc.message}", file=sys.stderr)
        return 2
    DaggersApp(plane, alerts_url=os.environ.get("DAGGERS_ALERTS_STORE") or None).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
