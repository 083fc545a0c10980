"""What every ``daggers`` command group shares: the consoles, the one-line error, the state folder.

The consoles show text as text (:class:`SafeConsole`): a control character in anything printed (a
comment, a description, an error quoting a name) is shown as an escape such as ``\\x1b``, never sent
to the terminal. A table's plain strings are text too; a styled cell is a ``rich.text.Text``.

A known error (:class:`~job.errors.DaggerError`) prints as ``title: message`` plus a ``hint:`` line and
exits with status 2. The full traceback is printed only with ``daggers --debug`` or ``DAGGERS_DEBUG=1``.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, cast

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from job.common.text import safe_text
from job.errors import DaggerError, debug_enabled

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
#: The colour systems Rich names (Console.color_system returns one of them, typed as a plain str).
ColorSystemName = Literal["auto", "standard", "256", "truecolor", "windows"]


class SafeConsole(Console):
    """A Rich console that never sends a control character it did not make: strings are made safe before
    they are laid out (:func:`job.common.text.safe_text`, newlines kept), and every segment once more after (a
    ``Text`` built from a user's string). The colours and links Rich writes itself are control segments and
    stay; markup in a user's string is the printer's part (``Text`` or ``escape``)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """Return ``text`` (markup, unless turned off) as Rich text, its control characters escaped."""
        return super().render_str(safe_text(text, multiline=True), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Render ``renderable`` to segments, the text of each one that is not a control made safe."""
        for segment in super().render(renderable, options):
            yield (
                segment
                if segment.control
                else Segment(safe_text(segment.text, multiline=True), segment.style)
            )


out = SafeConsole(soft_wrap=True)
err = SafeConsole(stderr=True, soft_wrap=True)

StateDir = Annotated[
    Path | None, typer.Option("--state-dir", help="Stack state folder ($DAGGERS_HOME or ./.daggers).")
]
SpecPath = Annotated[Path, typer.Argument(help="The dagger spec (YAML).", exists=False)]


def print_table(console: Console, table: Table, empty: str | None = None, *, markup: bool = False) -> None:
    """Print ``table`` on ``console``: at a terminal, in the terminal's width; to a pipe or a file, whole.
    A table without rows prints ``empty`` instead (what there is none of, and how to make one), if given.

    A cell given as a string is shown as it is: ``[bold]`` in a token's description is text, not a style
    (a styled cell is a ``rich.text.Text``); ``markup=True`` reads the strings as Rich markup instead, for
    tables whose printer escapes what came from users.

    Rich lays out output that is not a terminal in 80 columns, so ``daggers dagger list | grep`` once
    read "surge/…" for every dagger: the names, the one column a script needs, were cut first.
    """
    if empty is not None and not table.row_count:
        console.print(empty, markup=False, highlight=False)
        return
    if console.is_terminal:
        console.print(table, markup=markup)
        return
    natural = Measurement.get(console, console.options.update(width=100_000, markup=markup), table).maximum
    if natural <= console.width:
        console.print(table, markup=markup)
        return
    # print() caps its width at the console's: a console as wide as the table, on the same file
    SafeConsole(
        file=console.file,
        width=natural,
        highlight=False,
        no_color=console.no_color,
        color_system=cast(ColorSystemName | None, console.color_system),
    ).print(table, markup=markup)


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
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING if debug_enabled() else logging.CRITICAL + 1)
    if not debug_enabled():  # py4j also logs some errors on the root logger, with their traceback
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_from_py4j)
    quiet_spark_errors()


def _not_from_py4j(record: logging.LogRecord) -> bool:
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def quiet_spark_errors() -> None:
    """Keep PySpark from printing each SQL error with its Java stack trace (as a JSON log line on stderr) unless
    debugging: the command reports the error itself, as one line (:func:`job.query.runner.explain_failure`)."""
    if debug_enabled():
        return
    from pyspark.logger import PySparkLogger  # its own class: the loggers log with extra keywords

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)
    from pyspark import accumulators

    # their socketserver prints a traceback on stderr when the JVM goes away mid-update (an EOFError)
    for server in (accumulators.AccumulatorTCPServer, accumulators.AccumulatorUnixServer):
        server.handle_error = _accumulator_error  # type: ignore[method-assign]


def _accumulator_error(self: object, request: object, client_address: object) -> None:
    logging.getLogger("daggers.spark").debug(
        "accumulator update from %s failed", client_address, exc_info=True
    )
