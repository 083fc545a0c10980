"""``daggers audit``: who did what, when."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from job.cli.common import print_table
from job.cli.control.options import JsonOpt, PlaneOptions, plane_options
from job.cli.control.reply import emit, errors, out, when


@plane_options
def audit(
    limit: Annotated[int, typer.Option(help="Entries to show.")] = 50,
    target: Annotated[str | None, typer.Option(help="Only entries whose target contains this.")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Show who did what, when (your teams' entries; refused attempts too)."""
    with errors(as_json):
        rows = opts.plane().audit(limit, target)

    def human() -> None:
        t = Table("when (UTC)", "user", "action", "target", "allowed", "credential", "from", "details")
        for r in rows:
            t.add_row(
                when(r.at),
                r.user,
                r.action,
                r.target,
                "yes" if r.allowed else Text("DENIED", style="red"),
                r.credential or "-",
                r.source or "-",
                json.dumps(r.details, default=str)[:80],
            )
        print_table(out, t)

    emit([r.to_dict() for r in rows], as_json, human)
