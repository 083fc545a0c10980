"""``daggers dc``: data centres."""

from __future__ import annotations

from typing import Annotated

import typer

from job.cli.control.options import JsonOpt, PlaneOptions, plane_options
from job.cli.control.reply import emit, errors, ok, out

dc_app = typer.Typer(help="Data centres.", no_args_is_help=True)


@dc_app.command("add")
@plane_options
def dc_add(
    name: str,
    description: Annotated[str, typer.Option("--description")] = "",
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Add a data centre (superusers only)."""
    with errors(as_json):
        opts.plane().add_datacentre(name, description)
        ok(f"data centre {name} added", {"datacentre": name}, as_json)


@dc_app.command("list")
@plane_options
def dc_list(*, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List the data centres."""
    with errors(as_json):
        rows = opts.plane().datacentres()

    def human() -> None:
        for r in rows:
            out.print(f"{r['name']}  {r['description']}", markup=False)

    emit(rows, as_json, human)
