"""The control plane on the command line: ``daggers dagger|cluster|team|user|dc|registry|audit``,
``daggers controller`` and ``daggers tui``.

Call :func:`register` on the main Typer app. One module per command group; the options they share
(``--user``, ``--server``, ``--registry``, ``--state-dir``) are defined once in :mod:`job.cli.control.options`.
Every command acts as ``--user`` (or ``$DAGGERS_USER``) on the registry ``--registry`` (or
``$DAGGERS_REGISTRY``, default ``sqlite:///<state dir>/registry.db``); the rights are checked by the control
plane itself. ``--json`` prints machine-readable output (and, for a known error, ``{"ok": false, "error":
{...}}``). Known errors print ``title: message`` and exit 2 (:mod:`job.cli.control.reply`).
"""

from __future__ import annotations

import typer

from job.cli.control.audit import audit
from job.cli.control.clusters import cluster_app
from job.cli.control.console import tui
from job.cli.control.controller import controller
from job.cli.control.daggers import dagger_app
from job.cli.control.datacentres import dc_app
from job.cli.control.registry import registry_app
from job.cli.control.teams import team_app
from job.cli.control.users import user_app, whoami


def register(app: typer.Typer) -> None:
    """Add ``dagger``, ``cluster``, ``team``, ``user``, ``dc``, ``registry``, ``whoami``, ``audit``,
    ``controller`` and ``tui`` to ``app``."""
    app.add_typer(dagger_app, name="dagger")
    app.add_typer(cluster_app, name="cluster")
    app.add_typer(team_app, name="team")
    app.add_typer(user_app, name="user")
    app.add_typer(dc_app, name="dc")
    app.add_typer(registry_app, name="registry")
    app.command("whoami")(whoami)
    app.command("audit")(audit)
    app.command("controller")(controller)
    app.command("tui")(tui)


def main() -> None:
    """Run these commands on their own, without the rest of ``daggers``."""
    standalone = typer.Typer(
        name="daggers", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False
    )
    register(standalone)
    standalone()
