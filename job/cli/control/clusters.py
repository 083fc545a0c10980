"""``daggers cluster``: where daggers run, and their health."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from job.cli.common import print_table
from job.cli.control.options import JsonOpt, PlaneOptions, plane_options
from job.cli.control.reply import emit, errors, ok, out, span

cluster_app = typer.Typer(help="Clusters: where daggers run, and their health.", no_args_is_help=True)


@cluster_app.command("add")
@plane_options
def cluster_add(
    name: str,
    team: Annotated[str, typer.Option("--team", help="The team that owns it.")],
    dc: Annotated[str, typer.Option("--dc", help="Its data centre.")],
    master: Annotated[str, typer.Option("--master", help="local[*] or spark://host:port.")],
    kafka: Annotated[str, typer.Option("--kafka", help="Kafka bootstrap servers host:port[,...].")],
    influx: Annotated[str, typer.Option("--influx", help="InfluxDB URL.")],
    spark_ui: Annotated[str | None, typer.Option("--spark-ui", help="The master's web UI URL.")] = None,
    description: Annotated[str, typer.Option("--description")] = "",
    failover_to: Annotated[
        str | None,
        typer.Option(
            "--failover-to",
            help="A cluster of the team that takes over its running daggers when its "
            "controller is gone (checkpoints on shared storage).",
        ),
    ] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Add a cluster to a team (superusers and the team's admins)."""
    with errors(as_json):
        view = opts.plane().add_cluster(
            name,
            team=team,
            datacentre=dc,
            spark_master=master,
            kafka_bootstrap=kafka,
            influx_url=influx,
            spark_ui_url=spark_ui,
            description=description,
            failover_to=failover_to,
        )
        ok(f"cluster {name} added to {team} in {dc}", {"cluster": view.to_dict()}, as_json)


@cluster_app.command("failover")
@plane_options
def cluster_failover(
    name: str,
    to: Annotated[
        str | None,
        typer.Option("--to", help="The cluster of the same team that takes over (omit: no failover)."),
    ] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Set the cluster whose controller takes over this one's running daggers when this one's controller
    heartbeat is stale (team admins). The daggers resume from their checkpoints, which must be on
    storage both clusters mount at the same path."""
    with errors(as_json):
        view = opts.plane().set_failover(name, to)
        ok(
            f"cluster {name} fails over to {to}" if to else f"cluster {name}: no failover",
            {"cluster": view.to_dict()},
            as_json,
        )


@cluster_app.command("list")
@plane_options
def cluster_list(*, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List your teams' clusters by data centre, with their last recorded health."""
    with errors(as_json):
        rows = opts.plane().clusters()

    def human() -> None:
        t = Table("data centre", "cluster", "team", "master", "daggers", "failover", "state", "health")
        for c in rows:
            t.add_row(
                c.datacentre,
                c.name,
                c.team,
                c.spark_master,
                f"{c.daggers_running}/{c.daggers_total}",
                c.failover_to or "-",
                str(c.state.get("state", "-")),
                parts_line(c.health, c.state),
            )
        print_table(
            out,
            t,
            empty="No clusters of your teams yet. A team admin adds one: daggers cluster add NAME "
            "--team TEAM --dc DC --master 'local[2]' --kafka HOST:PORT --influx URL",
        )

    emit([c.to_dict() for c in rows], as_json, human)


@cluster_app.command("health")
@plane_options
def cluster_health(
    name: str,
    live: Annotated[
        bool,
        typer.Option("--live", help="Probe from here now instead of showing what the controller recorded."),
    ] = False,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Show a cluster's health: Spark master and workers, Kafka, InfluxDB, daggers running."""
    with errors(as_json):
        health = opts.plane().cluster_health(name, live=live)
    verdict = health.get("state") or {}

    def human() -> None:
        out.print(
            f"{name}: {verdict.get('state', '?')}"
            + (f" ({escape('; '.join(verdict['reasons']))})" if verdict.get("reasons") else "")
        )
        out.print(
            f"{parts_line(health, verdict) if 'spark' in health else escape(str(health.get('error')))} · daggers "
            + (", ".join(f"{n} {s}" for s, n in (verdict.get("daggers") or {}).items()) or "none")
        )

    emit(health, as_json, human)


def parts_line(health: dict[str, Any] | None, verdict: dict[str, Any]) -> str:
    """Return a cluster's parts as the health model judges them (``verdict``), with the probe's figures when a
    part is ok and the probe's age when it is stale: ``spark ok 2/2 workers 3/8 cores · kafka slow · influx
    stale 3m`` (slow: one probe unanswered; down: two in a row, or a refused connection)."""
    from job.control.health import summary

    parts = verdict.get("parts") or {}
    if not parts:
        return summary(health)
    figures = summary(health).split(" · ") if health and "spark" in health else []
    out = []
    for i, name in enumerate(("spark", "kafka", "influx")):
        state = str(parts.get(name) or "unknown")
        if state == "ok" and len(figures) == 3:
            out.append(figures[i])
        elif state == "stale":
            out.append(f"{name} stale {span(float(verdict.get('probe_age_s') or 0.0))}")
        else:
            out.append(f"{name} {state}")
    return " · ".join(out)


@cluster_app.command("topics")
@plane_options
def cluster_topics(name: str, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """List the topics on a cluster's brokers."""
    with errors(as_json):
        topics = opts.plane().cluster_topics(name)

    def human() -> None:
        for t in topics:
            out.print(t)

    emit(topics, as_json, human)
