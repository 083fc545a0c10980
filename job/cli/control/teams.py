"""``daggers team``: teams and their members' roles."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from job.cli.common import print_table
from job.cli.control.options import JsonOpt, PlaneOptions, plane_options
from job.cli.control.reply import emit, errors, ok, out

team_app = typer.Typer(help="Teams and their members' roles (viewer, editor, admin).", no_args_is_help=True)


@team_app.command("add")
@plane_options
def team_add(name: str, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """Add a team (superusers only)."""
    with errors(as_json):
        opts.plane().add_team(name)
        ok(f"team {name} added", {"team": name}, as_json)


@team_app.command("member")
@plane_options
def team_member(
    team: str,
    member: str,
    role: Annotated[str, typer.Option("--role", help="viewer, editor or admin.")] = "editor",
    remove: Annotated[bool, typer.Option("--remove", help="Remove the member instead.")] = False,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Give MEMBER a role in TEAM (or --remove them): superusers and the team's admins."""
    with errors(as_json):
        plane = opts.plane()
        if remove:
            plane.remove_member(team, member)
            ok(f"{member} removed from {team}", {"team": team, "user": member, "role": None}, as_json)
        else:
            plane.set_member(team, member, role)
            ok(f"{member} is {role} in {team}", {"team": team, "user": member, "role": role}, as_json)


@team_app.command("list")
@plane_options
def team_list(*, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List your teams and their members."""
    with errors(as_json):
        rows = opts.plane().teams()

    def human() -> None:
        t = Table("team", "members")
        for r in rows:
            t.add_row(r["team"], ", ".join(f"{k}:{v}" for k, v in r["members"].items()))
        print_table(
            out,
            t,
            empty="No teams you can see. A superuser makes one and adds members: daggers team add "
            "NAME, then daggers team member NAME USER --role editor",
        )

    emit(rows, as_json, human)
