"""``daggers up`` / ``down`` / ``status``: the local broker + InfluxDB stack (see :mod:`job.stack.local`).

Call :func:`register` on the main Typer app. Errors print one red line (plus the failing service's
last log lines when it did not start) and exit with code 2; ``status`` exits 1 when a service is down.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from job.cli.common import SafeConsole, fail, print_table
from job.errors import DaggerError
from job.stack.errors import StackError
from job.stack.local import LocalStack, StackStatus, default_state_dir

EXIT_DOWN = 1


class BrokerChoice(StrEnum):
    """Which Kafka-protocol broker ``daggers up`` starts."""

    tansu = "tansu"
    noida = "noida"


StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir", help="Folder for logs, PIDs and data (default: $DAGGERS_HOME or ./.daggers)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the status as JSON.")]


def _fail(exc: DaggerError | OSError) -> NoReturn:
    """Print ``exc`` as every command prints an error (``title: message``, the hint; the trace with
    ``--debug``) and exit 2; an OSError is a local stack error."""
    if isinstance(exc, OSError):
        wrapped = StackError(str(exc))
        wrapped.__cause__ = exc  # --debug shows where it was raised
        exc = wrapped
    fail(exc)


def _stack(state_dir: Path | None) -> LocalStack:
    return LocalStack(state_dir if state_dir is not None else default_state_dir())


def _print_status(status: StackStatus, as_json: bool) -> None:
    out = SafeConsole(highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(status.to_dict(), indent=2))
        return
    if not status.services:
        out.print(
            f"No local stack is recorded in {escape(str(status.state_dir))}; run [bold]daggers up[/bold]."
        )
        return
    table = Table(title=f"Local stack ({escape(str(status.state_dir))})", title_justify="left")
    for col in ("service", "kind", "address", "pid", "health"):
        table.add_column(col, no_wrap=True)
    for svc in status.services:
        health = (
            "[green]healthy[/green]"
            if svc.healthy
            else ("[yellow]not answering[/yellow]" if svc.running else "[red]down[/red]")
        )
        table.add_row(
            svc.name,
            svc.kind,
            svc.address,
            str(svc.pid) if svc.pid else "-",
            health,
        )
    print_table(out, table, markup=True)
    for svc in status.services:
        if not svc.healthy and svc.log_path:
            out.print(f"[dim]{svc.name} log: {escape(str(svc.log_path))}[/dim]")
    if status.database:
        out.print(f"InfluxDB database: {escape(status.database)}")


def up(
    broker: Annotated[BrokerChoice, typer.Option("--broker", help="Broker to start.")] = BrokerChoice.tansu,
    broker_port: Annotated[int, typer.Option("--broker-port", help="Kafka port on 127.0.0.1.")] = 9092,
    influx_port: Annotated[
        int, typer.Option("--influx-port", help="InfluxDB HTTP port on 127.0.0.1.")
    ] = 8086,
    state_dir: StateDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start the local broker and InfluxDB (and its `daggers` database); harmless when already up."""
    try:
        status = _stack(state_dir).up(broker=broker.value, broker_port=broker_port, influx_port=influx_port)
    except (DaggerError, OSError) as exc:
        _fail(exc)
    _print_status(status, as_json)
    if not status.healthy:
        raise typer.Exit(EXIT_DOWN)


def down(state_dir: StateDirOption = None) -> None:
    """Stop the local broker and InfluxDB (their data folders are kept)."""
    stack = _stack(state_dir)
    try:
        stack.down()
    except (DaggerError, OSError) as exc:
        _fail(exc)
    SafeConsole(highlight=False).print(f"Local stack in {escape(str(stack.state_dir))} is stopped.")


def status(state_dir: StateDirOption = None, as_json: JsonOption = False) -> None:
    """Show each local service's address, PID and health; exit code 1 when anything is down."""
    try:
        result = _stack(state_dir).status()
    except (DaggerError, OSError) as exc:
        _fail(exc)
    _print_status(result, as_json)
    if not result.healthy:
        raise typer.Exit(EXIT_DOWN)


def register(app: typer.Typer) -> None:
    """Add the ``up``, ``down`` and ``status`` commands to ``app``."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("status")(status)
