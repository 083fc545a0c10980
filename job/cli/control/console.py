"""``daggers tui``: open the operator console."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from job.cli.control.options import PlaneOptions, plane_options
from job.cli.control.reply import errors


@plane_options
def tui(
    *,
    opts: PlaneOptions,
    alerts_store: Annotated[
        str | None,
        typer.Option(
            "--alerts-store",
            envvar="DAGGERS_ALERTS_STORE",
            help="The alert store URL, for the alerts feed (default: <state dir>/alerts.db if it exists).",
        ),
    ] = None,
) -> None:
    """Open the operator console."""
    with errors(False):
        plane = opts.plane()
        plane.whoami()  # fail here, not inside the console, for an unknown user
    from job.stack.local import default_state_dir

    default_alerts = (opts.state_dir or default_state_dir()) / "alerts.db"  # daggers alerts' default store
    if alerts_store is None and default_alerts.is_file():
        alerts_store = f"sqlite:///{default_alerts}"
    # The console lives outside job/ (job never imports textual): run it as its own module.
    # Settings go by environment, not argv: a registry URL may carry a password that `ps` would show.
    from job.control.client import server_of

    target = server_of(opts.server)
    env = {**os.environ, "DAGGERS_USER": plane.user, "DAGGERS_REGISTRY": opts.registry_url()}
    if target is not None:  # the console goes through the server too, as the signed-in user
        env.pop("DAGGERS_USER")
        env.pop("DAGGERS_REGISTRY")
        env["DAGGERS_SERVER"] = target[0]
    if alerts_store:
        env["DAGGERS_ALERTS_STORE"] = alerts_store
    # -P: the working folder is not on its import path (`python -m` puts it first: a ./tui.py would run)
    os.execve(sys.executable, [sys.executable, "-P", "-m", "tui"], env)
