"""``daggers user`` (users of the control plane) and ``daggers whoami``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from job.cli.common import print_table
from job.cli.control.options import JsonOpt, PlaneOptions, plane_options
from job.cli.control.reply import emit, errors, ok, out

user_app = typer.Typer(help="Users of the control plane.", no_args_is_help=True)


@user_app.command("add")
@plane_options
def user_add(
    name: str,
    superuser: Annotated[bool, typer.Option("--superuser")] = False,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Add a user (superusers only)."""
    with errors(as_json):
        opts.plane().add_user(name, superuser=superuser)
        ok(f"user {name} added", {"user": name}, as_json)


@user_app.command("list")
@plane_options
def user_list(*, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List the users you can see, with their roles."""
    with errors(as_json):
        rows = opts.plane().users()

    def human() -> None:
        t = Table("user", "superuser", "teams")
        for r in rows:
            t.add_row(
                r["user"],
                "yes" if r["superuser"] else "",
                ", ".join(f"{k}:{v}" for k, v in r["teams"].items()),
            )
        print_table(out, t, empty="No users you can see; a superuser adds one: daggers user add NAME")

    emit(rows, as_json, human)


@plane_options
def whoami(*, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """Show who you act as and your roles."""
    with errors(as_json):
        me = opts.plane().whoami()
    emit(
        me,
        as_json,
        lambda: out.print(
            f"{me['user']}{' (superuser)' if me['superuser'] else ''}: "
            + (", ".join(f"{k}:{v}" for k, v in me["teams"].items()) or "no team"),
            markup=False,
        ),
    )
