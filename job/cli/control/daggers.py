"""``daggers dagger``: create, preview, deploy, edit and stop daggers."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table

from job.cli.common import print_table
from job.cli.control.dagger_views import dagger_table, progress_lines
from job.cli.control.options import FreshOpt, JsonOpt, PlaneOptions, RefArg, plane_options
from job.cli.control.reply import EXIT_ERROR, emit, errors, ok, out, when
from job.common.text import safe_text
from job.common.words import counted

dagger_app = typer.Typer(help="Create, preview, deploy, edit and stop daggers.", no_args_is_help=True)


def _read(path: Path) -> str:
    """Return the spec text of file ``path`` as it goes to the control plane: carrying the ``udf_file`` beside
    it (:func:`job.control.udf_carry.attach_udf`), which the dagger's controller cannot read."""
    from job.control.udf_carry import attach_udf
    from job.errors import SpecError

    if not path.is_file():
        raise SpecError(f"no spec file at {path}")
    return attach_udf(path.read_text(), path)


@dagger_app.command("list")
@plane_options
def dagger_list(
    cluster: Annotated[str | None, typer.Option("--cluster")] = None,
    search: Annotated[str | None, typer.Option("--search")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """List the daggers of your teams."""
    with errors(as_json):
        rows = opts.plane().daggers(cluster, search)
    empty = (
        "No daggers match."
        if cluster or search
        else "No daggers in your teams yet: daggers dagger create SPEC --cluster CLUSTER --deploy"
    )
    emit([d.to_dict() for d in rows], as_json, lambda: print_table(out, dagger_table(rows), empty=empty))


@dagger_app.command("show")
@plane_options
def dagger_show(ref: RefArg, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """Show a dagger's state, progress, last error and moves between clusters."""
    from job.control.fusing import fusion_hint

    with errors(as_json):
        plane = opts.plane()
        d = plane.dagger(ref)
        moves = plane.moves(d.ref)
        isolation, partners = plane.fusible_with(d.ref)

    def human() -> None:
        print_table(out, dagger_table([d]))
        out.print(f"health: {d.state} ({escape(str(d.health.get('reason') or ''))})")
        if d.moving_from:
            out.print(
                f"[yellow]moving:[/] from {d.moving_from} to {d.cluster} (the old cluster stops it first)"
            )
        for m in moves:
            why = f" ({escape(m.details['reason'])})" if m.details.get("reason") else ""
            out.print(
                f"{m.action}: {escape(str(m.details.get('from')))} -> {escape(str(m.details.get('to')))} "
                f"by {escape(m.user)} at {when(m.at)} UTC{why}"
            )
        for line in progress_lines(d):
            out.print(escape(line))
        if d.last_error:
            again = (
                f" (before it started again at {when(d.started_at)} UTC)"
                if d.actual_state == "running" and d.started_at
                else ""
            )
            out.print(f"[red]last error{again}:[/] {escape(d.last_error)}")
        if hint := fusion_hint(d.cluster, isolation, partners):
            out.print(f"[yellow]hint:[/] {escape(hint)}")

    emit(
        {
            **d.to_dict(),
            "moves": [m.to_dict() for m in moves],
            "isolation": isolation,
            "fusible_with": partners,
        },
        as_json,
        human,
    )


@dagger_app.command("validate")
@plane_options
def dagger_validate(
    spec: Path,
    cluster: Annotated[str, typer.Option("--cluster")],
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Check a spec for a cluster (schemas, SQL with line and column) without running anything."""
    with errors(as_json):
        v = opts.plane().validate(cluster, _read(spec))
    where = f" (SQL line {v.line}, column {v.col})" if v.line else ""

    def human() -> None:
        out.print("[green]OK[/]" if v.ok else f"[red]{escape(v.title)}{where}:[/] {escape(v.message)}")
        if not v.ok and v.hint:
            out.print(f"[yellow]hint:[/] {escape(v.hint)}")

    emit(v.to_dict(), as_json, human)
    if not v.ok:
        raise typer.Exit(EXIT_ERROR)


@dagger_app.command("create")
@plane_options
def dagger_create(
    spec: Path,
    cluster: Annotated[str, typer.Option("--cluster")],
    deploy: Annotated[bool, typer.Option("--deploy", help="Run it at once.")] = False,
    comment: Annotated[str, typer.Option("--comment")] = "",
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Create a dagger on a cluster from a spec file (version 1)."""
    from job.control.fusing import fusion_hint

    with errors(as_json):
        plane = opts.plane()
        d = plane.create(cluster, _read(spec), deploy=deploy, comment=comment)
        isolation, partners = plane.fusible_with(d.ref)
        ok(
            f"created {d.ref} v1 on {cluster}" + (" and asked to deploy it" if deploy else ""),
            {"dagger": d.to_dict(), "fusible_with": partners},
            as_json,
        )
        if not as_json and (hint := fusion_hint(d.cluster, isolation, partners)):
            out.print(f"[yellow]hint:[/] {escape(hint)}")


def _state_change(name: str, verb: str) -> None:
    def command(ref: RefArg, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
        with errors(as_json):
            d = getattr(opts.plane(), name)(ref)
            ok(
                f"{d.ref}: {verb} (desired {d.desired_state}; the controller acts on it)",
                {"dagger": d.to_dict()},
                as_json,
            )

    command.__doc__ = {
        "deploy": "Run the dagger's current version.",
        "stop": "Stop the dagger gracefully (deploy resumes it from its checkpoint).",
        "restart": "Stop and start the dagger, forgetting earlier crashes.",
        "delete": "Stop and delete the dagger (team admins); its history stays.",
    }[name]
    dagger_app.command(name)(plane_options(command))


for _name, _verb in (
    ("deploy", "deploy asked"),
    ("stop", "stop asked"),
    ("restart", "restart asked"),
    ("delete", "delete asked"),
):
    _state_change(_name, _verb)


@dagger_app.command("move")
@plane_options
def dagger_move(
    ref: RefArg,
    cluster: Annotated[str, typer.Option("--cluster", help="Another cluster of the team.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why (kept in the audit log).")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Move the dagger to another cluster of its team: the old cluster stops it, the new one resumes it from
    the same checkpoint (which must be on storage both clusters mount at the same path)."""
    with errors(as_json):
        d = opts.plane().move(ref, cluster, reason=reason)
        ok(
            f"{d.ref}: moving from {d.moving_from} to {d.cluster} (its controllers hand it over)",
            {"dagger": d.to_dict()},
            as_json,
        )


def _print_edit(result: Any, as_json: bool) -> None:
    c = result.compatibility

    def human() -> None:
        out.print(
            f"{result.ref}: version {result.version} ({'rolling out now' if result.redeploys else 'not running'})"
        )
        if c.resume:
            out.print(f"[green]resumes from the checkpoint[/] (epoch {result.checkpoint_epoch})")
        else:
            out.print(
                f"[yellow]starts a NEW checkpoint[/] (epoch {result.checkpoint_epoch}): "
                + escape("; ".join(c.reasons))
            )
        for note in c.notes:
            out.print(f"  note: {escape(note)}")

    emit({"ok": True, **result.to_dict()}, as_json, human)


@dagger_app.command("edit")
@plane_options
def dagger_edit(
    ref: RefArg,
    spec: Path,
    fresh_start: FreshOpt = False,
    expect_version: Annotated[
        int | None, typer.Option("--expect-version", help="Refuse if the current version is not this one.")
    ] = None,
    comment: Annotated[str, typer.Option("--comment")] = "",
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Make a spec file the dagger's next version; says whether it resumes from the checkpoint."""
    with errors(as_json):
        result = opts.plane().edit(
            ref, _read(spec), expected_version=expect_version, allow_fresh_start=fresh_start, comment=comment
        )
    _print_edit(result, as_json)


@dagger_app.command("rollback")
@plane_options
def dagger_rollback(
    ref: RefArg,
    to: Annotated[int, typer.Option("--to", help="The version to go back to.")],
    fresh_start: FreshOpt = False,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Make an earlier version's spec the next version."""
    with errors(as_json):
        result = opts.plane().rollback(ref, to, allow_fresh_start=fresh_start)
    _print_edit(result, as_json)


@dagger_app.command("publish")
@plane_options
def dagger_publish(
    ref: RefArg,
    topic: Annotated[str, typer.Option("--topic", help="The Kafka topic.")],
    bootstrap: Annotated[str | None, typer.Option("--bootstrap", help="Default: the cluster's.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="json or protobuf.")] = "json",
    proto_class: Annotated[
        str | None, typer.Option("--proto-class", help="With --format protobuf: the output message.")
    ] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Publish the dagger's rows to a Kafka topic too (a new version with a Kafka sink)."""
    with errors(as_json):
        result = opts.plane().publish_to_kafka(
            ref, topic, bootstrap_servers=bootstrap, fmt=fmt, proto_class=proto_class
        )
    _print_edit(result, as_json)


@dagger_app.command("history")
@plane_options
def dagger_history(ref: RefArg, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List the dagger's spec versions."""
    with errors(as_json):
        rows = opts.plane().history(ref)

    def human() -> None:
        t = Table("v", "when (UTC)", "by", "checkpoint", "comment")
        for v in rows:
            t.add_row(
                str(v.version), when(v.created_at), v.created_by, f"epoch {v.checkpoint_epoch}", v.comment
            )
        print_table(out, t)

    emit([v.to_dict() for v in rows], as_json, human)


@dagger_app.command("diff")
@plane_options
def dagger_diff(
    ref: RefArg,
    a: Annotated[int | None, typer.Option("--from")] = None,
    b: Annotated[int | None, typer.Option("--to")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Show the diff between two spec versions (default: the previous and the current one)."""
    with errors(as_json):
        text = opts.plane().diff(ref, a, b)
    emit({"diff": text}, as_json, lambda: out.print(escape(text) or "(no difference)"))


@dagger_app.command("spec")
@plane_options
def dagger_spec(
    ref: RefArg,
    version: Annotated[int | None, typer.Option("--version")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Print a spec version (default: the current one)."""
    with errors(as_json):
        v = opts.plane().version(ref, version)
    emit(
        v.to_dict(),
        as_json,
        lambda: typer.echo(safe_text(v.spec_text.replace("\r\n", "\n"), multiline=True), nl=False),
    )


@dagger_app.command("preview")
@plane_options
def dagger_preview(
    ref: Annotated[str | None, typer.Argument(help="The dagger (or give --spec).")] = None,
    spec: Annotated[Path | None, typer.Option("--spec", help="Preview a spec file instead.")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="With --spec.")] = None,
    minutes: Annotated[float, typer.Option(help="How far back to read.")] = 5.0,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Run the SQL over the last minutes of the topics and show the first rows (nothing is deployed)."""
    from job.control import ControlError

    logging.getLogger("py4j").setLevel(logging.WARNING)
    with errors(as_json):
        plane = opts.plane()
        if spec is not None:
            if not cluster:
                raise ControlError("--spec needs --cluster")
            table = plane.preview_text(cluster, _read(spec), minutes=minutes, limit=limit)
        elif ref:
            table = plane.preview(ref, minutes=minutes, limit=limit)
        else:
            raise ControlError("name a dagger or give --spec FILE --cluster NAME")
    rows = table.to_pylist()

    def human() -> None:
        t = Table(*table.column_names)
        for r in rows:
            t.add_row(*(str(v) for v in r.values()))
        print_table(out, t)
        out.print(counted(len(rows), "row"))

    emit(rows, as_json, human)


@dagger_app.command("output")
@plane_options
def dagger_output(
    ref: RefArg,
    field: Annotated[
        str, typer.Option("--field", "-f", help="The numeric column to chart (summed per step).")
    ],
    since: Annotated[str, typer.Option(help="How far back: 15m, 1h, 1d, 900s, ...")] = "15m",
    step: Annotated[
        str | None, typer.Option(help="Bucket size (default: 30s for 15m, 2m for 1h, 1h for 1d).")
    ] = None,
    tag: Annotated[str | None, typer.Option(help="Only rows whose tag is this value: key=value.")] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(help="Overlay the day before (D-1) or the week before (D-7); repeat or D-1,D-7."),
    ] = None,
    until: Annotated[datetime | None, typer.Option(help="End of the range, UTC (default: now).")] = None,
    sink: Annotated[
        str | None,
        typer.Option(
            help="The sink to read (default: the first influx, else postgres, else elasticsearch one)."
        ),
    ] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Show a dagger's own output from its sink: the sum of a field per step, with D-1 and D-7."""
    from job.output import OutputQuery, parse_compare, parse_duration, parse_tag, step_text

    with errors(as_json):
        since_s = parse_duration(since)
        query = OutputQuery(
            field=field,
            since_s=since_s,
            step_s=parse_duration(step, "--step") if step else None,
            until=until.replace(tzinfo=UTC) if until and until.tzinfo is None else until,
            tag=parse_tag(tag),
            compare=tuple(c for text in compare or [] for c in parse_compare(text)),
        )
        result = opts.plane().output(ref, query, sink)

    def human() -> None:
        where = f" where {result.tag[0]} = {result.tag[1]}" if result.tag else ""
        out.print(
            escape(
                f"{result.dagger}: sum of {result.field} every {step_text(result.step_s)}{where}, "
                f"{result.start:%Y-%m-%d %H:%M:%S} to {result.end:%Y-%m-%d %H:%M:%S} UTC, from "
                f"{result.source} at {result.server}"
            )
        )
        table = Table(Column("time (UTC)"), *(Column(s.label, justify="right") for s in result.series))
        for at, values in result.rows():
            table.add_row(f"{at:%Y-%m-%d %H:%M:%S}", *("-" if v is None else _number(v) for v in values))
        print_table(out, table, empty="No rows in this range.")

    emit(result.to_dict(), as_json, human)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"
