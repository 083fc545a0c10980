"""What every ``daggers`` command group shares: the consoles, the one-line error, the state folder.

A known error (:class:`~job.errors.DaggerError`) prints as ``title: message`` plus a ``hint:`` line and
exits with status 2. The full traceback is printed only with ``daggers --debug`` or ``DAGGERS_DEBUG=1``.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from job.errors import DaggerError, debug_enabled

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

StateDir = Annotated[Path | None, typer.Option("--state-dir", help="Stack state folder ($DAGGERS_HOME or ./.daggers).")]
SpecPath = Annotated[Path, typer.Argument(help="The dagger spec (YAML).", exists=False)]


def print_table(console: Console, table: Table, empty: str | None = None) -> None:
    """Print ``table`` on ``console``: at a terminal, in the terminal's width; to a pipe or a file, whole.
    A table without rows prints ``empty`` instead (what there is none of, and how to make one), if given.

    Rich lays out output that is not a terminal in 80 columns, so ``daggers dagger list | grep`` once
    read "surge/…" for every dagger: the names, the one column a script needs, were cut first.
    """
    if empty is not None and not table.row_count:
        console.print(empty, markup=False, highlight=False)
        return
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update_width(100_000), table).maximum
    if natural <= console.width:
        console.print(table)
        return
    # print() caps its width at the console's: a console as wide as the table, on the same file
    Console(file=console.file, width=natural, highlight=False, no_color=console.no_color,
            color_system=console.color_system).print(table)


def print_error(exc: DaggerError) -> None:
    """Print a known error for a person: ``title: message``, then ``hint: …`` (and the trace if debugging)."""
    if debug_enabled():
        err.print("".join(traceback.format_exception(exc)), markup=False, highlight=False)
    err.print(f"[bold red]{escape(exc.title)}:[/] {escape(exc.message)}", highlight=False)
    if exc.hint:
        err.print(f"[yellow]hint:[/] {escape(exc.hint)}", highlight=False)


def fail(exc: DaggerError) -> NoReturn:
    """Print a known error for a person and exit 2."""
    print_error(exc)
    raise typer.Exit(EXIT_ERROR)


def state_dir_or_default(state_dir: Path | None) -> Path:
    """The ``--state-dir`` given, else ``$DAGGERS_HOME`` or ``./.daggers``."""
    from job.stack.local import default_state_dir

    return state_dir or default_state_dir()


def setup_logging(verbose: bool) -> None:
    """Log to stderr at INFO (DEBUG with ``--verbose``), py4j kept quiet.

    py4j logs the whole traceback of an error raised in a ``foreachBatch`` callback; the runner reports
    that error itself, as one line, so py4j's own log shows only when debugging.
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING if debug_enabled() else logging.CRITICAL + 1)
