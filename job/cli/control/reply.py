"""How a control-plane command answers: text or ``--json``; a known error as ``title: message``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NoReturn

import typer

from job.cli.common import SafeConsole, print_error
from job.errors import DaggerError

EXIT_ERROR = 2
out = SafeConsole(highlight=False, soft_wrap=True)  # text as text: see job.cli.common


def fail(exc: DaggerError, as_json: bool) -> NoReturn:
    """Print ``exc`` (``{"ok": false, "error": {...}}`` with ``as_json``); exit with :data:`EXIT_ERROR`."""
    if as_json:
        typer.echo(
            json.dumps(
                {"ok": False, "error": {"title": exc.title, "message": exc.message, "hint": exc.hint}},
                indent=2,
            )
        )
    else:
        print_error(exc)
    raise typer.Exit(EXIT_ERROR)


@contextmanager
def errors(as_json: bool) -> Iterator[None]:
    """Turn a DaggerError inside the block into :func:`fail`."""
    try:
        yield
    except DaggerError as exc:
        fail(exc, as_json)


def emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    """Print ``data`` as JSON with ``as_json``, else call ``human`` to print it for a person."""
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        human()


def ok(message: str, data: dict[str, Any], as_json: bool) -> None:
    """Print ``message``, or ``{"ok": true, **data}`` with ``as_json``."""
    emit({"ok": True, **data}, as_json, lambda: out.print(message, markup=False))


def when(ts: float | None) -> str:
    """Return a time as ``YYYY-MM-DD HH:MM:SS`` (UTC); ``-`` for none."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def span(seconds: float) -> str:
    """Return a duration as ``3d``, ``2h``, ``5m`` or ``40s``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
