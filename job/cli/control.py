"""The control plane on the command line: ``daggers dagger|cluster|team|user|dc|registry|audit``,
``daggers controller`` and ``daggers tui``.

Call :func:`register` on the main Typer app. Every command acts as ``--user`` (or ``$DAGGERS_USER``)
on the registry ``--registry`` (or ``$DAGGERS_REGISTRY``, default ``sqlite:///<state dir>/registry.db``);
the rights are checked by the control plane itself. ``--json`` prints machine-readable output (and,
for a known error, ``{"ok": false, "error": {...}}``). Known errors print ``title: message`` and exit 2.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from job.cli.common import SafeConsole, print_error, print_table
from job.errors import DaggerError
from job.text import safe_text
from job.words import counted

EXIT_ERROR = 2
out = SafeConsole(highlight=False, soft_wrap=True)  # text as text: see job.cli.common
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)

UserOpt = Annotated[str | None, typer.Option("--user", "-u", envvar="DAGGERS_USER",
                                             help="Without a server: act as this user ($DAGGERS_USER; default: "
                                                  "the OS user). Refused with a server.")]
ServerOpt = Annotated[str | None, typer.Option("--server", envvar="DAGGERS_SERVER",
                                               help="Go through this daggers server ($DAGGERS_SERVER; default: "
                                                    "the one of `daggers login`, else the local registry).")]
RegistryOpt = Annotated[str | None, typer.Option("--registry", envvar="DAGGERS_REGISTRY",
                                                 help="Registry URL: sqlite:///path or postgresql://... "
                                                      "(default: sqlite:///<state dir>/registry.db).")]
StateOpt = Annotated[Path | None, typer.Option("--state-dir", help="State folder ($DAGGERS_HOME or ./.daggers).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
RefArg = Annotated[str, typer.Argument(help="The dagger: team/name, or name when it is unique in your teams.")]
FreshOpt = Annotated[bool, typer.Option("--fresh-start", help="Allow a change that cannot resume from the "
                                                              "checkpoint (new checkpoint, empty state).")]

dagger_app = typer.Typer(help="Create, preview, deploy, edit and stop daggers.", no_args_is_help=True)
cluster_app = typer.Typer(help="Clusters: where daggers run, and their health.", no_args_is_help=True)
team_app = typer.Typer(help="Teams and their members' roles (viewer, editor, admin).", no_args_is_help=True)
user_app = typer.Typer(help="Users of the control plane.", no_args_is_help=True)
dc_app = typer.Typer(help="Data centres.", no_args_is_help=True)
registry_app = typer.Typer(help="The registry database.", no_args_is_help=True)


# ---- plumbing ----------------------------------------------------------------------------------

def _fail(exc: DaggerError, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(json.dumps({"ok": False, "error": {"title": exc.title, "message": exc.message,
                                                      "hint": exc.hint}}, indent=2))
    else:
        print_error(exc)
    raise typer.Exit(EXIT_ERROR)


def _registry_url(registry: str | None, state_dir: Path | None) -> str:
    from job.control.registry import default_registry_url

    return registry or default_registry_url(state_dir)


@contextmanager
def _errors(as_json: bool) -> Iterator[None]:
    try:
        yield
    except DaggerError as exc:
        _fail(exc, as_json)


def _plane(user: str | None, registry: str | None, state_dir: Path | None = None, server: str | None = None) -> Any:
    """Return the server's control plane (as the signed-in user) or, without a server, the embedded one on
    the local registry as ``user`` or the OS user (see :func:`job.control.client.open_plane`)."""
    from job.control.client import open_plane, server_of

    if server_of(server) is not None:
        return open_plane(user, "", server)
    return open_plane(user, _registry_url(registry, state_dir), None)


def _emit(data: Any, as_json: bool, human: Callable[[], None]) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        human()


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _ok(message: str, data: dict[str, Any], as_json: bool) -> None:
    _emit({"ok": True, **data}, as_json, lambda: out.print(message, markup=False))


# ---- registry, users, teams, data centres -----------------------------------------------------

@registry_app.command("init")
def registry_init(admin: Annotated[str, typer.Option("--admin", help="The first user, a superuser.")],
                  registry: RegistryOpt = None, state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Create the registry's tables and its first user (a superuser)."""
    from job.control import Registry, bootstrap_admin

    with _errors(as_json):
        reg = Registry(_registry_url(registry, state_dir))
        bootstrap_admin(reg, admin)
        _ok(f"registry {reg.safe_url} ready; superuser {admin}", {"registry": reg.safe_url, "admin": admin},
            as_json)


@user_app.command("add")
def user_add(name: str, superuser: Annotated[bool, typer.Option("--superuser")] = False, user: UserOpt = None, server: ServerOpt = None,
             registry: RegistryOpt = None, state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Add a user (superusers only)."""
    with _errors(as_json):
        _plane(user, registry, state_dir, server).add_user(name, superuser=superuser)
        _ok(f"user {name} added", {"user": name}, as_json)


@user_app.command("list")
def user_list(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
              as_json: JsonOpt = False) -> None:
    """List the users you can see, with their roles."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).users()

    def human() -> None:
        t = Table("user", "superuser", "teams")
        for r in rows:
            t.add_row(r["user"], "yes" if r["superuser"] else "", ", ".join(f"{k}:{v}" for k, v in r["teams"].items()))
        print_table(out, t, empty="No users you can see; a superuser adds one: daggers user add NAME")
    _emit(rows, as_json, human)


@team_app.command("add")
def team_add(name: str, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
             as_json: JsonOpt = False) -> None:
    """Add a team (superusers only)."""
    with _errors(as_json):
        _plane(user, registry, state_dir, server).add_team(name)
        _ok(f"team {name} added", {"team": name}, as_json)


@team_app.command("member")
def team_member(team: str, member: str,
                role: Annotated[str, typer.Option("--role", help="viewer, editor or admin.")] = "editor",
                remove: Annotated[bool, typer.Option("--remove", help="Remove the member instead.")] = False,
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Give MEMBER a role in TEAM (or --remove them): superusers and the team's admins."""
    with _errors(as_json):
        plane = _plane(user, registry, state_dir, server)
        if remove:
            plane.remove_member(team, member)
            _ok(f"{member} removed from {team}", {"team": team, "user": member, "role": None}, as_json)
        else:
            plane.set_member(team, member, role)
            _ok(f"{member} is {role} in {team}", {"team": team, "user": member, "role": role}, as_json)


@team_app.command("list")
def team_list(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
              as_json: JsonOpt = False) -> None:
    """List your teams and their members."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).teams()

    def human() -> None:
        t = Table("team", "members")
        for r in rows:
            t.add_row(r["team"], ", ".join(f"{k}:{v}" for k, v in r["members"].items()))
        print_table(out, t, empty="No teams you can see. A superuser makes one and adds members: daggers team add "
                                  "NAME, then daggers team member NAME USER --role editor")
    _emit(rows, as_json, human)


@dc_app.command("add")
def dc_add(name: str, description: Annotated[str, typer.Option("--description")] = "", user: UserOpt = None, server: ServerOpt = None,
           registry: RegistryOpt = None, state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Add a data centre (superusers only)."""
    with _errors(as_json):
        _plane(user, registry, state_dir, server).add_datacentre(name, description)
        _ok(f"data centre {name} added", {"datacentre": name}, as_json)


@dc_app.command("list")
def dc_list(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
            as_json: JsonOpt = False) -> None:
    """List the data centres."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).datacentres()
    _emit(rows, as_json, lambda: [out.print(f"{r['name']}  {r['description']}", markup=False) for r in rows])


def whoami(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
           as_json: JsonOpt = False) -> None:
    """Show who you act as and your roles."""
    with _errors(as_json):
        me = _plane(user, registry, state_dir, server).whoami()
    _emit(me, as_json, lambda: out.print(f"{me['user']}{' (superuser)' if me['superuser'] else ''}: "
                                         + (", ".join(f"{k}:{v}" for k, v in me["teams"].items()) or "no team"),
                                         markup=False))


def audit(limit: Annotated[int, typer.Option(help="Entries to show.")] = 50,
          target: Annotated[str | None, typer.Option(help="Only entries whose target contains this.")] = None,
          user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
          as_json: JsonOpt = False) -> None:
    """Show who did what, when (your teams' entries; refused attempts too)."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).audit(limit, target)

    def human() -> None:
        t = Table("when (UTC)", "user", "action", "target", "allowed", "credential", "from", "details")
        for r in rows:
            t.add_row(_when(r.at), r.user, r.action, r.target, "yes" if r.allowed else Text("DENIED", style="red"),
                      r.credential or "-", r.source or "-", json.dumps(r.details, default=str)[:80])
        print_table(out, t)
    _emit([r.to_dict() for r in rows], as_json, human)


# ---- clusters ----------------------------------------------------------------------------------

@cluster_app.command("add")
def cluster_add(name: str,
                team: Annotated[str, typer.Option("--team", help="The team that owns it.")],
                dc: Annotated[str, typer.Option("--dc", help="Its data centre.")],
                master: Annotated[str, typer.Option("--master", help="local[*] or spark://host:port.")],
                kafka: Annotated[str, typer.Option("--kafka", help="Kafka bootstrap servers host:port[,...].")],
                influx: Annotated[str, typer.Option("--influx", help="InfluxDB URL.")],
                spark_ui: Annotated[str | None, typer.Option("--spark-ui", help="The master's web UI URL.")] = None,
                description: Annotated[str, typer.Option("--description")] = "",
                failover_to: Annotated[str | None, typer.Option(
                    "--failover-to", help="A cluster of the team that takes over its running daggers when its "
                                          "controller is gone (checkpoints on shared storage).")] = None,
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Add a cluster to a team (superusers and the team's admins)."""
    with _errors(as_json):
        view = _plane(user, registry, state_dir, server).add_cluster(
            name, team=team, datacentre=dc, spark_master=master, kafka_bootstrap=kafka, influx_url=influx,
            spark_ui_url=spark_ui, description=description, failover_to=failover_to)
        _ok(f"cluster {name} added to {team} in {dc}", {"cluster": view.to_dict()}, as_json)


@cluster_app.command("failover")
def cluster_failover(name: str,
                     to: Annotated[str | None, typer.Option("--to", help="The cluster of the same team that takes "
                                                                         "over (omit: no failover).")] = None,
                     user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                     as_json: JsonOpt = False) -> None:
    """Set the cluster whose controller takes over this one's running daggers when this one's controller
    heartbeat is stale (team admins). The daggers resume from their checkpoints, which must be on
    storage both clusters mount at the same path."""
    with _errors(as_json):
        view = _plane(user, registry, state_dir, server).set_failover(name, to)
        _ok(f"cluster {name} fails over to {to}" if to else f"cluster {name}: no failover",
            {"cluster": view.to_dict()}, as_json)


@cluster_app.command("list")
def cluster_list(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                 as_json: JsonOpt = False) -> None:
    """List your teams' clusters by data centre, with their last recorded health."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).clusters()

    def human() -> None:
        t = Table("data centre", "cluster", "team", "master", "daggers", "failover", "state", "health")
        for c in rows:
            t.add_row(c.datacentre, c.name, c.team, c.spark_master, f"{c.daggers_running}/{c.daggers_total}",
                      c.failover_to or "-", str(c.state.get("state", "-")), parts_line(c.health, c.state))
        print_table(out, t, empty="No clusters of your teams yet. A team admin adds one: daggers cluster add NAME "
                                  "--team TEAM --dc DC --master 'local[2]' --kafka HOST:PORT --influx URL")
    _emit([c.to_dict() for c in rows], as_json, human)


@cluster_app.command("health")
def cluster_health(name: str,
                   live: Annotated[bool, typer.Option("--live", help="Probe from here now instead of showing "
                                                                     "what the controller recorded.")] = False,
                   user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                   as_json: JsonOpt = False) -> None:
    """Show a cluster's health: Spark master and workers, Kafka, InfluxDB, daggers running."""
    with _errors(as_json):
        health = _plane(user, registry, state_dir, server).cluster_health(name, live=live)
    verdict = health.get("state") or {}

    def human() -> None:
        out.print(f"{name}: {verdict.get('state', '?')}" + (f" ({escape('; '.join(verdict['reasons']))})"
                                                          if verdict.get("reasons") else ""))
        out.print(f"{parts_line(health, verdict) if 'spark' in health else escape(str(health.get('error')))} · daggers "
                  + (", ".join(f"{n} {s}" for s, n in (verdict.get("daggers") or {}).items()) or "none"))
    _emit(health, as_json, human)


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
            out.append(f"{name} stale {_span(float(verdict.get('probe_age_s') or 0.0))}")
        else:
            out.append(f"{name} {state}")
    return " · ".join(out)


@cluster_app.command("topics")
def cluster_topics(name: str, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                   as_json: JsonOpt = False) -> None:
    """List the topics on a cluster's brokers."""
    with _errors(as_json):
        topics = _plane(user, registry, state_dir, server).cluster_topics(name)
    _emit(topics, as_json, lambda: [out.print(t) for t in topics])


# ---- daggers -----------------------------------------------------------------------------------

def _read(path: Path) -> str:
    from job.errors import SpecError

    if not path.is_file():
        raise SpecError(f"no spec file at {path}")
    return path.read_text()


def figure_text(figure: dict[str, Any] | None, fmt: str = "{:.0f}") -> str:
    """Return a figure of the health model as a person reads it: ``967``, ``967 (4m old)``; ``-`` for none."""
    if not figure:
        return "-"
    text = fmt.format(figure["value"])
    return text if figure.get("fresh") else f"{text} ({_span(figure['age_s'])} old)"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _dagger_table(rows: list[Any]) -> Table:
    # the dagger and its cluster are never cut: at a narrow terminal the figures give way
    t = Table(Column("dagger", no_wrap=True), Column("cluster", no_wrap=True), "v", "desired", "actual",
              Column("health", no_wrap=True), Column("rows/s", justify="right"), Column("lag", justify="right"),
              Column("batch ms", justify="right"), Column("restarts", justify="right"))
    for d in rows:
        h = d.health
        t.add_row(d.ref, d.cluster, str(d.current_version), d.desired_state, d.actual_state, d.state,
                  figure_text(h.get("rows_per_s")), figure_text(h.get("lag")), figure_text(h.get("batch_ms")),
                  str(d.restarts))
    return t


@dagger_app.command("list")
def dagger_list(cluster: Annotated[str | None, typer.Option("--cluster")] = None,
                search: Annotated[str | None, typer.Option("--search")] = None,
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """List the daggers of your teams."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).daggers(cluster, search)
    empty = ("No daggers match." if cluster or search else
             "No daggers in your teams yet: daggers dagger create SPEC --cluster CLUSTER --deploy")
    _emit([d.to_dict() for d in rows], as_json, lambda: print_table(out, _dagger_table(rows), empty=empty))


#: A figure older than this is stale when the health model gives none (its own ``figure_fresh_s``, 30 s).
FIGURE_FRESH_S = 30.0


def _ago(seconds: float) -> str:
    """``45 s``, ``6 min``, ``3 h``, ``2 d``: how long ago, for a figure's age."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 1.5 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _as_of(d: Any, name: str, value: float | None, at: float | None, now: float) -> tuple[float | None, str]:
    """Return a figure's value and when it holds, from the health model's figure ``name`` when there is one (else
    ``value`` measured at ``at``): "now" only for a fresh figure of a live dagger, else its age ("6 min ago
    (stale)"); a figure whose time is not known is "at an unknown time (stale)"."""
    fig = (d.health or {}).get(name)
    if fig:
        value, age, fresh = fig.get("value"), float(fig.get("age_s") or 0.0), bool(fig.get("fresh"))
    elif at:
        age = max(0.0, now - float(at))
        fresh = age <= FIGURE_FRESH_S
    else:
        return value, "at an unknown time (stale)"
    if fresh and d.actual_state in ("starting", "running"):
        return value, "now"
    return value, f"{_ago(age)} ago" + ("" if fresh else " (stale)")


def progress_lines(d: Any, now: float | None = None) -> list[str]:
    """Return what a person reads of a dagger's last progress report (``--json`` has all of it). A rate or a
    lag says "now" only when it is fresh, else how old it is (it said "206 rows/s now" of a figure 6 minutes
    old)."""
    import time

    p = d.progress
    if not p:
        return []
    now = time.time() if now is None else now
    rate, rate_when = _as_of(d, "rows_per_s", p.get("input_rows_per_s", 0), p.get("batch_at") or p.get("updated_at"),
                             now)
    lag = ""
    if d.lag is not None:
        lag_value, lag_when = _as_of(d, "lag", d.lag, getattr(d, "lag_at", None), now)
        lag = f"; lag {counted(int(lag_value or 0), 'record', fmt=',')}" + ("" if lag_when == "now" else f" {lag_when}")
    lines = [f"read {counted(p.get('input_rows', 0), 'row', fmt=',')} in {counted(p.get('batches', 0), 'batch', fmt=',')} "
             f"({counted(p.get('late_rows_dropped', 0), 'late row', fmt=',')} dropped, "
             f"{counted(p.get('bad_records', 0), 'bad record', fmt=',')}); "
             f"{float(rate or 0):,.0f} rows/s {rate_when}{lag}"]
    if "batch_duration_ms" in p:
        phases = sorted(p.get("batch_phases_ms", {}).items(), key=lambda kv: -kv[1])
        slowest = ", ".join(f"{k} {v:,}" for k, v in [kv for kv in phases if kv[0] != "triggerExecution"][:4])
        lines.append(f"last batch {p['batch_duration_ms']:,} ms" + (f" ({slowest})" if slowest else ""))
    if p.get("watermark"):
        lines.append(f"watermark {p['watermark']}")
    for name, sink in (p.get("sinks") or {}).items():
        windows = (f"; windows {sink['first_window']} to {sink['last_window']}"
                   if sink.get("first_window") else "")
        error = f"; last error: {sink['last_error']}" if sink.get("last_error") else ""
        if isinstance(retrying := sink.get("retrying"), dict):  # a write being retried (job.sinks.base)
            error += (f"; retrying: attempt {retrying.get('attempt')}/{retrying.get('of')}, next in "
                      f"{_ago(max(0.0, float(retrying.get('next_at') or now) - now))} ({retrying.get('error')})")
        lines.append(f"sink {name}: {counted(sink.get('rows_written', 0), 'row', fmt=',')} in "
                     f"{counted(sink.get('writes', 0), 'write', fmt=',')} ({counted(sink.get('retries', 0), 'retry', fmt=',')}, "
                     f"{counted(sink.get('failures', 0), 'failure', fmt=',')}) to "
                     f"{sink.get('target', sink.get('sink_type', '?'))}{windows}{error}")
    lines += lookup_lines(p.get("lookups") or {})
    return lines


def lookup_lines(lookups: dict[str, dict[str, Any]]) -> list[str]:
    """Return one line per lookup of a progress report: rows, keys and the cache's hit rate, requests,
    misses, errors (rows written with NULLs) and the mean latency per batch."""
    lines = []
    for name, m in lookups.items():
        error = f"; last error: {m['last_error']}" if m.get("last_error") else ""
        lines.append(f"lookup {name}: {m.get('rows', 0):,} rows, {m.get('keys', 0):,} keys "
                     f"({float(m.get('hit_rate') or 0):.0%} from the cache), {m.get('requests', 0):,} requests, "
                     f"{m.get('not_found', 0):,} not found, {m.get('errors', 0):,} errors "
                     f"({m.get('rows_with_errors', 0):,} rows with NULLs), {float(m.get('mean_ms') or 0):,.1f} ms "
                     f"a batch to {m.get('target') or m.get('lookup_type', '?')}{error}")
    return lines


@dagger_app.command("show")
def dagger_show(ref: RefArg, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Show a dagger's state, progress, last error and moves between clusters."""
    from job.control.fusing import fusion_hint

    with _errors(as_json):
        plane = _plane(user, registry, state_dir, server)
        d = plane.dagger(ref)
        moves = plane.moves(d.ref)
        isolation, partners = plane.fusible_with(d.ref)

    def human() -> None:
        print_table(out, _dagger_table([d]))
        out.print(f"health: {d.state} ({escape(str(d.health.get('reason') or ''))})")
        if d.moving_from:
            out.print(f"[yellow]moving:[/] from {d.moving_from} to {d.cluster} (the old cluster stops it first)")
        for m in moves:
            why = f" ({escape(m.details['reason'])})" if m.details.get("reason") else ""
            out.print(f"{m.action}: {escape(str(m.details.get('from')))} -> {escape(str(m.details.get('to')))} "
                      f"by {escape(m.user)} at {_when(m.at)} UTC{why}")
        for line in progress_lines(d):
            out.print(escape(line))
        if d.last_error:
            again = (f" (before it started again at {_when(d.started_at)} UTC)"
                     if d.actual_state == "running" and d.started_at else "")
            out.print(f"[red]last error{again}:[/] {escape(d.last_error)}")
        if hint := fusion_hint(d.cluster, isolation, partners):
            out.print(f"[yellow]hint:[/] {escape(hint)}")
    _emit({**d.to_dict(), "moves": [m.to_dict() for m in moves], "isolation": isolation, "fusible_with": partners},
          as_json, human)


@dagger_app.command("validate")
def dagger_validate(spec: Path, cluster: Annotated[str, typer.Option("--cluster")], user: UserOpt = None, server: ServerOpt = None,
                    registry: RegistryOpt = None, state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Check a spec for a cluster (schemas, SQL with line and column) without running anything."""
    with _errors(as_json):
        v = _plane(user, registry, state_dir, server).validate(cluster, _read(spec))
    where = f" (SQL line {v.line}, column {v.col})" if v.line else ""
    _emit(v.to_dict(), as_json, lambda: out.print("[green]OK[/]" if v.ok else
                                                  f"[red]{escape(v.title)}{where}:[/] {escape(v.message)}"))
    if not v.ok:
        raise typer.Exit(EXIT_ERROR)


@dagger_app.command("create")
def dagger_create(spec: Path, cluster: Annotated[str, typer.Option("--cluster")],
                  deploy: Annotated[bool, typer.Option("--deploy", help="Run it at once.")] = False,
                  comment: Annotated[str, typer.Option("--comment")] = "",
                  user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                  as_json: JsonOpt = False) -> None:
    """Create a dagger on a cluster from a spec file (version 1)."""
    from job.control.fusing import fusion_hint

    with _errors(as_json):
        plane = _plane(user, registry, state_dir, server)
        d = plane.create(cluster, _read(spec), deploy=deploy, comment=comment)
        isolation, partners = plane.fusible_with(d.ref)
        _ok(f"created {d.ref} v1 on {cluster}" + (" and asked to deploy it" if deploy else ""),
            {"dagger": d.to_dict(), "fusible_with": partners}, as_json)
        if not as_json and (hint := fusion_hint(d.cluster, isolation, partners)):
            out.print(f"[yellow]hint:[/] {escape(hint)}")



def _state_change(name: str, verb: str) -> None:
    def command(ref: RefArg, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
        with _errors(as_json):
            d = getattr(_plane(user, registry, state_dir, server), name)(ref)
            _ok(f"{d.ref}: {verb} (desired {d.desired_state}; the controller acts on it)", {"dagger": d.to_dict()},
                as_json)
    command.__doc__ = {"deploy": "Run the dagger's current version.",
                       "stop": "Stop the dagger gracefully (deploy resumes it from its checkpoint).",
                       "restart": "Stop and start the dagger, forgetting earlier crashes.",
                       "delete": "Stop and delete the dagger (team admins); its history stays."}[name]
    dagger_app.command(name)(command)


for _name, _verb in (("deploy", "deploy asked"), ("stop", "stop asked"), ("restart", "restart asked"),
                     ("delete", "delete asked")):
    _state_change(_name, _verb)


@dagger_app.command("move")
def dagger_move(ref: RefArg, cluster: Annotated[str, typer.Option("--cluster", help="Another cluster of the team.")],
                reason: Annotated[str | None, typer.Option("--reason", help="Why (kept in the audit log).")] = None,
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Move the dagger to another cluster of its team: the old cluster stops it, the new one resumes it from
    the same checkpoint (which must be on storage both clusters mount at the same path)."""
    with _errors(as_json):
        d = _plane(user, registry, state_dir, server).move(ref, cluster, reason=reason)
        _ok(f"{d.ref}: moving from {d.moving_from} to {d.cluster} (its controllers hand it over)",
            {"dagger": d.to_dict()}, as_json)


def _print_edit(result: Any, as_json: bool) -> None:
    c = result.compatibility

    def human() -> None:
        out.print(f"{result.ref}: version {result.version} ({'rolling out now' if result.redeploys else 'not running'})")
        if c.resume:
            out.print(f"[green]resumes from the checkpoint[/] (epoch {result.checkpoint_epoch})")
        else:
            out.print(f"[yellow]starts a NEW checkpoint[/] (epoch {result.checkpoint_epoch}): "
                      + escape("; ".join(c.reasons)))
        for note in c.notes:
            out.print(f"  note: {escape(note)}")
    _emit({"ok": True, **result.to_dict()}, as_json, human)


@dagger_app.command("edit")
def dagger_edit(ref: RefArg, spec: Path, fresh_start: FreshOpt = False,
                expect_version: Annotated[int | None, typer.Option("--expect-version", help="Refuse if the "
                                                                   "current version is not this one.")] = None,
                comment: Annotated[str, typer.Option("--comment")] = "",
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Make a spec file the dagger's next version; says whether it resumes from the checkpoint."""
    with _errors(as_json):
        result = _plane(user, registry, state_dir, server).edit(ref, _read(spec), expected_version=expect_version,
                                                         allow_fresh_start=fresh_start, comment=comment)
    _print_edit(result, as_json)


@dagger_app.command("rollback")
def dagger_rollback(ref: RefArg, to: Annotated[int, typer.Option("--to", help="The version to go back to.")],
                    fresh_start: FreshOpt = False, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None,
                    state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Make an earlier version's spec the next version."""
    with _errors(as_json):
        result = _plane(user, registry, state_dir, server).rollback(ref, to, allow_fresh_start=fresh_start)
    _print_edit(result, as_json)


@dagger_app.command("publish")
def dagger_publish(ref: RefArg, topic: Annotated[str, typer.Option("--topic", help="The Kafka topic.")],
                   bootstrap: Annotated[str | None, typer.Option("--bootstrap", help="Default: the cluster's.")] = None,
                   fmt: Annotated[str, typer.Option("--format", help="json or protobuf.")] = "json",
                   proto_class: Annotated[str | None, typer.Option("--proto-class", help="With --format "
                                                                   "protobuf: the output message.")] = None,
                   user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                   as_json: JsonOpt = False) -> None:
    """Publish the dagger's rows to a Kafka topic too (a new version with a Kafka sink)."""
    with _errors(as_json):
        result = _plane(user, registry, state_dir, server).publish_to_kafka(ref, topic, bootstrap_servers=bootstrap,
                                                                    fmt=fmt, proto_class=proto_class)
    _print_edit(result, as_json)


@dagger_app.command("history")
def dagger_history(ref: RefArg, user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                   as_json: JsonOpt = False) -> None:
    """List the dagger's spec versions."""
    with _errors(as_json):
        rows = _plane(user, registry, state_dir, server).history(ref)

    def human() -> None:
        t = Table("v", "when (UTC)", "by", "checkpoint", "comment")
        for v in rows:
            t.add_row(str(v.version), _when(v.created_at), v.created_by, f"epoch {v.checkpoint_epoch}", v.comment)
        print_table(out, t)
    _emit([v.to_dict() for v in rows], as_json, human)


@dagger_app.command("diff")
def dagger_diff(ref: RefArg, a: Annotated[int | None, typer.Option("--from")] = None,
                b: Annotated[int | None, typer.Option("--to")] = None, user: UserOpt = None, server: ServerOpt = None,
                registry: RegistryOpt = None, state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Show the diff between two spec versions (default: the previous and the current one)."""
    with _errors(as_json):
        text = _plane(user, registry, state_dir, server).diff(ref, a, b)
    _emit({"diff": text}, as_json, lambda: out.print(escape(text) or "(no difference)"))


@dagger_app.command("spec")
def dagger_spec(ref: RefArg, version: Annotated[int | None, typer.Option("--version")] = None,
                user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                as_json: JsonOpt = False) -> None:
    """Print a spec version (default: the current one)."""
    with _errors(as_json):
        v = _plane(user, registry, state_dir, server).version(ref, version)
    _emit(v.to_dict(), as_json, lambda: typer.echo(safe_text(v.spec_text.replace("\r\n", "\n"), multiline=True),
                                                   nl=False))


@dagger_app.command("preview")
def dagger_preview(ref: Annotated[str | None, typer.Argument(help="The dagger (or give --spec).")] = None,
                   spec: Annotated[Path | None, typer.Option("--spec", help="Preview a spec file instead.")] = None,
                   cluster: Annotated[str | None, typer.Option("--cluster", help="With --spec.")] = None,
                   minutes: Annotated[float, typer.Option(help="How far back to read.")] = 5.0,
                   limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
                   user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
                   as_json: JsonOpt = False) -> None:
    """Run the SQL over the last minutes of the topics and show the first rows (nothing is deployed)."""
    from job.control import ControlError

    logging.getLogger("py4j").setLevel(logging.WARNING)
    with _errors(as_json):
        plane = _plane(user, registry, state_dir, server)
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
        out.print(counted(len(rows), 'row'))
    _emit(rows, as_json, human)


@dagger_app.command("output")
def dagger_output(ref: RefArg,
                  field: Annotated[str, typer.Option("--field", "-f", help="The numeric column to chart (summed "
                                                                          "per step).")],
                  since: Annotated[str, typer.Option(help="How far back: 15m, 1h, 1d, 900s, ...")] = "15m",
                  step: Annotated[str | None, typer.Option(help="Bucket size (default: 30s for 15m, 2m for 1h, "
                                                                "1h for 1d).")] = None,
                  tag: Annotated[str | None, typer.Option(help="Only rows whose tag is this value: key=value.")] = None,
                  compare: Annotated[list[str] | None, typer.Option(help="Overlay the day before (D-1) or the "
                                                                         "week before (D-7); repeat or D-1,D-7.")] = None,
                  until: Annotated[datetime | None, typer.Option(help="End of the range, UTC (default: now).")] = None,
                  sink: Annotated[str | None, typer.Option(help="The sink to read (default: the first influx, "
                                                                "else postgres, else elasticsearch one).")] = None,
                  user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None,
                  state_dir: StateOpt = None, as_json: JsonOpt = False) -> None:
    """Show a dagger's own output from its sink: the sum of a field per step, with D-1 and D-7."""
    from job.output import OutputQuery, parse_compare, parse_duration, parse_tag, step_text

    with _errors(as_json):
        since_s = parse_duration(since)
        query = OutputQuery(field=field, since_s=since_s, step_s=parse_duration(step, "--step") if step else None,
                            until=until.replace(tzinfo=UTC) if until and until.tzinfo is None else until,
                            tag=parse_tag(tag), compare=tuple(c for text in compare or [] for c in parse_compare(text)))
        result = _plane(user, registry, state_dir, server).output(ref, query, sink)

    def human() -> None:
        where = f" where {result.tag[0]} = {result.tag[1]}" if result.tag else ""
        out.print(escape(f"{result.dagger}: sum of {result.field} every {step_text(result.step_s)}{where}, "
                         f"{result.start:%Y-%m-%d %H:%M:%S} to {result.end:%Y-%m-%d %H:%M:%S} UTC, from "
                         f"{result.source} at {result.server}"))
        table = Table(Column("time (UTC)"), *(Column(s.label, justify="right") for s in result.series))
        for when, values in result.rows():
            table.add_row(f"{when:%Y-%m-%d %H:%M:%S}", *("-" if v is None else _number(v) for v in values))
        print_table(out, table, empty="No rows in this range.")
    _emit(result.to_dict(), as_json, human)


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"


# ---- controller and console ----------------------------------------------------------------------

def controller(cluster: Annotated[str, typer.Option("--cluster", help="The cluster to run daggers on.")],
               server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
               poll: Annotated[float, typer.Option(help="Seconds between reconcile rounds.")] = 1.0,
               max_restarts: Annotated[int, typer.Option(help="Crashes in a row restarted.")] = 5,
               backoff: Annotated[float, typer.Option(help="First restart delay (doubles).")] = 2.0,
               max_backoff: Annotated[float, typer.Option(help="Longest restart delay: the doubling stops "
                                                                "there.")] = 120.0,
               stop_daggers_on_exit: Annotated[bool, typer.Option(help="Stop the daggers when the controller "
                                                                       "stops (default: leave them running).")] = False,
               standby: Annotated[bool, typer.Option(help="Keep a warm dagger process for the next deploy "
                                                          "(local masters).")] = True,
               failover_after: Annotated[float, typer.Option(help="Take over the running daggers of a cluster that "
                                                                  "fails over to this one once its controller "
                                                                  "heartbeat is this many seconds old.")] = 60.0,
               metrics_port: Annotated[int, typer.Option(help="Serve Prometheus metrics on this port (0: one the "
                                                              "OS picks, recorded in the registry; -1: none).")] = 0,
               verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    """Run a cluster's controller: start, watch, restart and stop its daggers as the registry says."""
    from job.control import Registry
    from job.control.controller import Controller, ControllerSettings
    from job.stack.local import default_state_dir

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    with _errors(False):
        root = (state_dir or default_state_dir()) / "controller" / cluster
        settings = ControllerSettings(poll_interval_s=poll, max_restarts=max_restarts, backoff_initial_s=backoff,
                                      backoff_max_s=max_backoff, standby=standby, failover_after_s=failover_after,
                                      metrics_port=None if metrics_port < 0 else metrics_port)
        from job.control.client import server_of

        target = server_of(server)
        if target is not None:  # through the server, with the cluster's controller token ($DAGGERS_TOKEN)
            from job.control.errors import AuthError
            from job.control.remote import RemoteClusterAgent

            url, token, ca = target
            if not token:
                raise AuthError(f"no controller token for the server {url}",
                                hint=f"a team admin makes one: daggers token create --cluster {cluster}; "
                                     "give it as $DAGGERS_TOKEN")
            store: Any = RemoteClusterAgent(url, token, cluster, verify=ca or True)
        else:
            store = Registry(_registry_url(registry, state_dir))
        ctl = Controller(store, cluster, root, settings=settings)
        ctl.run_forever(stop_daggers_on_exit=stop_daggers_on_exit)


def tui(user: UserOpt = None, server: ServerOpt = None, registry: RegistryOpt = None, state_dir: StateOpt = None,
        alerts_store: Annotated[str | None, typer.Option("--alerts-store", envvar="DAGGERS_ALERTS_STORE",
                                                         help="The alert store URL, for the alerts feed "
                                                              "(default: <state dir>/alerts.db if it exists).")] = None
        ) -> None:
    """Open the operator console."""
    with _errors(False):
        plane = _plane(user, registry, state_dir, server)
        plane.whoami()  # fail here, not inside the console, for an unknown user
    from job.stack.local import default_state_dir

    default_alerts = (state_dir or default_state_dir()) / "alerts.db"  # daggers alerts' default store
    if alerts_store is None and default_alerts.is_file():
        alerts_store = f"sqlite:///{default_alerts}"
    # The console lives outside job/ (job never imports textual): run it as its own module.
    # Settings go by environment, not argv: a registry URL may carry a password that `ps` would show.
    from job.control.client import server_of

    target = server_of(server)
    env = {**os.environ, "DAGGERS_USER": plane.user, "DAGGERS_REGISTRY": _registry_url(registry, state_dir)}
    if target is not None:  # the console goes through the server too, as the signed-in user
        env.pop("DAGGERS_USER")
        env.pop("DAGGERS_REGISTRY")
        env["DAGGERS_SERVER"] = target[0]
    if alerts_store:
        env["DAGGERS_ALERTS_STORE"] = alerts_store
    # -P: the working folder is not on its import path (`python -m` puts it first: a ./tui.py would run)
    os.execve(sys.executable, [sys.executable, "-P", "-m", "tui"], env)


def register(app: typer.Typer) -> None:
    """Add ``dagger``, ``cluster``, ``team``, ``user``, ``dc``, ``registry``, ``whoami``, ``audit``,
    ``controller`` and ``tui`` to ``app``."""
    app.add_typer(dagger_app, name="dagger")
    app.add_typer(cluster_app, name="cluster")
    app.add_typer(team_app, name="team")
    app.add_typer(user_app, name="user")
    app.add_typer(dc_app, name="dc")
    app.add_typer(registry_app, name="registry")
    app.command("whoami")(whoami)
    app.command("audit")(audit)
    app.command("controller")(controller)
    app.command("tui")(tui)


def main() -> None:
    """Run these commands on their own, without the rest of ``daggers``."""
    standalone = typer.Typer(name="daggers", no_args_is_help=True, pretty_exceptions_enable=False,
                             add_completion=False)
    register(standalone)
    standalone()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
