"""``daggers``: the one command line for every job a user does.

Each command group lives in its own module of this package and adds itself with ``register(app)``.
Errors that Daggers knows (bad spec, bad SQL, unreachable services…) print as a short
``title: message`` with the line, column or field to fix, and exit with status 2; never a traceback
(unless ``--debug`` or ``DAGGERS_DEBUG=1``).
"""

from __future__ import annotations

import sys

import typer

from job.cli import alerts, atlas, chaos, control, produce, protos, run, sql, stack
from job.cli.common import print_error
from job.errors import DaggerError

app = typer.Typer(name="daggers", help="Real-time aggregation over Kafka protobuf streams with Dagger SQL.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

for _group in (run, sql, protos, stack, produce, chaos, alerts, atlas, control):
    _group.register(app)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except DaggerError as exc:  # pragma: no cover - commands catch their own
        print_error(exc)
        sys.exit(2)


if __name__ == "__main__":
    main()
