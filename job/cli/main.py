"""``daggers``: the one command line for every job a user does.

Each command group lives in its own module of this package and adds itself with ``register(app)``.
Errors that Daggers knows (bad spec, bad SQL, unreachable services…) print as a short
``title: message`` with the line, column or field to fix, and exit with status 2; never a traceback
(unless ``--debug`` or ``DAGGERS_DEBUG=1``).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from typing import Annotated

import typer

from job.cli import alerts, atlas, chaos, control, jvm, produce, protos, run, server, sql, stack
from job.cli.common import out, print_error
from job.errors import DEBUG_ENV, DaggerError

app = typer.Typer(
    name="daggers",
    help="Real-time aggregation over Kafka protobuf streams with Dagger SQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _daggers_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    import job

    try:
        return version("daggers")
    except PackageNotFoundError:  # run from a source folder
        return job.__version__


def _show_version(value: bool) -> None:
    if value:
        out.print(f"daggers {_daggers_version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Print full tracebacks and Spark's own logs (also: DAGGERS_DEBUG=1)."),
    ] = False,
) -> None:
    """Real-time aggregation over Kafka protobuf streams with Dagger SQL."""
    if debug:
        os.environ[DEBUG_ENV] = "1"  # children (Spark, controllers' daggers) inherit it


for _group in (run, sql, protos, stack, produce, chaos, alerts, atlas, control, server, jvm):
    _group.register(app)


def main() -> None:
    """Console-script entry point. ``kill -USR1 <pid>`` prints where each of its threads is (to its standard
    error), for a command that seems stuck; it goes on running."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        app()
    except DaggerError as exc:  # pragma: no cover - commands catch their own
        print_error(exc)
        sys.exit(2)


if __name__ == "__main__":
    main()
