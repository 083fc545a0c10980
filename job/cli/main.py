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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from job.cli import alerts, atlas, chaos, control, jvm, produce, protos, run, server, sql, stack
from job.cli.common import EXIT_ERROR, out, print_error
from job.errors import DEBUG_ENV, CommandLineError, DaggerError

if TYPE_CHECKING:  # the type of Typer's contexts: the click it vendors
    from typer._click import Context


#: Where the root group keeps its command line, to name the command of an error that carries no context
_ARGS = "daggers.args"


def _command_path(ctx: Context) -> str:
    """Return the path of the command ``ctx``'s line names (``daggers sql check``): as far as its words
    name groups' commands; an option (``--debug``) is passed over."""
    words, command = [ctx.command_path], ctx.command
    for arg in ctx.meta.get(_ARGS, []):
        sub = command.commands.get(arg) if isinstance(command, TyperGroup) else None
        if sub is not None:
            words.append(arg)
            command = sub
        elif not arg.startswith("-"):
            break
    return " ".join(words)


@contextmanager
def _command_line_errors(root: Context | None = None) -> Iterator[None]:
    """Print a command line that cannot be read (an unknown command or option, a bad or missing value, a
    file that cannot be opened) as the error model's ``title: message`` and ``hint:``, and exit 2: not
    click's usage box. Typer's click errors are TyperExceptions; a group given no command shows its help."""
    try:
        yield
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            raise
        ctx: Context | None = getattr(exc, "ctx", None)
        where = (
            ctx.command_path if ctx is not None else _command_path(root) if root is not None else "daggers"
        )
        message = _named_number(exc) or exc.format_message().replace(": Value error, ", ": ")  # pydantic's
        print_error(CommandLineError(message, hint=f"see {where} --help"))
        raise typer.Exit(EXIT_ERROR) from None


def _named_number(exc: typer.TyperException) -> str | None:
    """Return the message of an option given a bad number, naming the value (``Invalid value for '--rate':
    "abc" is not a number``), from the pydantic error Typer's conversion raised; None for another error."""
    from pydantic import ValidationError
    from pydantic.fields import FieldInfo

    from job.spec.numbers import number_problem

    cause = exc.__cause__
    if not isinstance(cause, ValidationError) or not cause.errors():
        return None
    error = cause.errors()[0]
    kind = int if "int" in cause.title else float if "float" in cause.title else None  # "constrained-int"
    field = FieldInfo.from_annotation(kind) if kind is not None else None
    given = error["input"] if isinstance(error["input"], str) else None  # as typed
    number = number_problem(error, field, given)
    head, sep, _ = exc.format_message().partition(": ")
    return f"{head}: {number}" if number is not None and sep else None


class _Root(TyperGroup):
    """The ``daggers`` group. A command's line is read in its ``make_context`` (the root's own options) or
    in its parent's ``invoke`` (every subcommand's), so both print a usage error as
    :func:`_command_line_errors` does, whatever the command."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        words = list(args)
        with _command_line_errors():
            ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta[_ARGS] = words
        return ctx

    def invoke(self, ctx: Context) -> Any:
        with _command_line_errors(ctx):
            return super().invoke(ctx)


app = typer.Typer(
    name="daggers",
    help="Real-time aggregation over Kafka protobuf streams with Dagger SQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=_Root,
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
