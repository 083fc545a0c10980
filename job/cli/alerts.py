"""``daggers alerts``: run the alert engine, try a rule, see what fires, manage silences.

Call :func:`register` on the main Typer app. Commands:

* ``daggers alerts run``: evaluate every rule and platform check on schedule and deliver notifications
  until Ctrl-C/SIGTERM (state, history and the outbox live in the store, so a restart picks up);
* ``daggers alerts test RULE [--at TIME]``: evaluate a rule once and show what it would send (nothing
  is stored or sent);
* ``daggers alerts list``: the alerts firing (or pending) now, and notifications still queued;
* ``daggers alerts check``: validate the configuration and summarise it;
* ``daggers alerts history [RULE]``: the newest state changes and deliveries;
* ``daggers alerts silence add|list|expire``: hold notifications back for a while.

The configuration comes from ``--config`` (or ``$DAGGERS_ALERTS_CONFIG``, default ``alerts.yaml``).
Known errors print one red ``title: message`` line and exit with code 2.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from job.cli.common import SafeConsole, fail, print_table
from job.common.words import counted
from job.errors import DaggerError

if TYPE_CHECKING:
    from alerting.config import AlertsConfig
    from alerting.engine import EvaluationReport

EXIT_ERROR = 2

alerts_app = typer.Typer(
    help="Threshold, no-data and platform alerts on the daggers' output.", no_args_is_help=True
)
silence_app = typer.Typer(
    help="Hold notifications of matching alerts back for a while.", no_args_is_help=True
)
alerts_app.add_typer(silence_app, name="silence")

ConfigOption = Annotated[
    Path,
    typer.Option(
        "--config",
        "-c",
        envvar="DAGGERS_ALERTS_CONFIG",
        help="The alerting configuration (YAML; $DAGGERS_ALERTS_CONFIG).",
    ),
]
StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir", help="State folder for the default SQLite store ($DAGGERS_HOME or ./.daggers)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
DEFAULT_CONFIG = Path("alerts.yaml")


def _out() -> Console:
    return SafeConsole(highlight=False, soft_wrap=True)


def _state_dir(state_dir: Path | None) -> Path:
    from job.stack.local import default_state_dir

    return state_dir if state_dir is not None else default_state_dir()


def _config(path: Path) -> AlertsConfig:
    from alerting.config import load_config

    return load_config(path)


def _iso(epoch: float | None) -> str:
    return "-" if epoch is None else datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _parse_time(text: str) -> float:
    from alerting.errors import AlertConfigError

    if text.strip().lower() == "now":
        return time.time()
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AlertConfigError(
            f"{text!r} is not 'now' or an ISO 8601 time such as 2026-03-02T08:05:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _value(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.6g}"


# ---- run ------------------------------------------------------------------------------------------


@alerts_app.command("run")
def run_command(
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every evaluation.")] = False,
) -> None:
    """Run the alert engine until Ctrl-C or SIGTERM (a restart resumes from the store)."""
    from alerting.engine import AlertEngine

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("apscheduler.executors.default", "apscheduler.scheduler", "urllib3.connectionpool"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)
    stop = threading.Event()
    try:
        cfg = _config(config)
        engine = AlertEngine(cfg, state_dir=_state_dir(state_dir))
    except DaggerError as exc:
        fail(exc)
    out = _out()
    out.print(
        f"[bold]daggers alerts[/bold]: {counted(len(cfg.rules), 'rule')}, {counted(len(cfg.channels), 'channel')}, "
        f"store {escape(engine.store.safe_url)}"
    )
    for name, notifier in engine.notifiers.items():
        out.print(f"  channel {escape(name)}: {escape(notifier.describe())}")

    def _stop(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        engine.run_forever(stop)
    except DaggerError as exc:
        engine.close()
        fail(exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    engine.close()
    out.print("alert engine stopped")


# ---- test -----------------------------------------------------------------------------------------


def _report_json(report: EvaluationReport) -> dict[str, Any]:
    return {
        "rule": report.rule,
        "at": _iso(report.at),
        "queries": list(report.queries),
        "groups": [
            {
                "tags": g.tags,
                "value": g.value,
                "raw_level": g.raw_level.name,
                "level": g.level.name,
                "previous_level": g.previous_level.name,
                "pending": g.pending,
                "flapping": g.flapping,
                "message": g.message,
                "held": g.held,
                "silenced_by": g.silenced_by,
                "channels": list(g.channels),
                "notification": g.notification.to_json() if g.notification else None,
            }
            for g in report.groups
        ],
    }


@alerts_app.command("test")
def test_command(
    rule: Annotated[str, typer.Argument(help="The rule's name.")],
    config: ConfigOption = DEFAULT_CONFIG,
    at: Annotated[str, typer.Option(help="Evaluate as of this time: now or ISO 8601.")] = "now",
    state_dir: StateDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Evaluate RULE once and show each group's value and level, and what would be sent where (nothing is
    stored or sent; the current state comes from the store)."""
    from alerting.engine import AlertEngine

    try:
        cfg = _config(config)
        cfg.rule(rule)
        engine = AlertEngine(cfg, state_dir=_state_dir(state_dir))
        try:
            report = engine.evaluate_rule(rule, _parse_time(at), dry_run=True)
        finally:
            engine.close()
    except DaggerError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(_report_json(report), indent=2))
        return
    out = _out()
    out.print(f"[bold]{escape(rule)}[/bold] as of {_iso(report.at)}")
    for q in report.queries:
        out.print(f"  [dim]{escape(q)}[/dim]")
    if not report.groups:
        out.print("no groups: the query returned nothing")
    table = Table(title_justify="left")
    for col in ("group", "value", "level", "notified", "would send"):
        table.add_column(col)
    for g in report.groups:
        level = (
            g.level.name
            + (f" (pending {g.raw_level.name})" if g.pending else "")
            + (" flapping" if g.flapping else "")
        )
        if g.notification is not None:
            send = f"{g.notification.title} → {', '.join(g.channels) or 'no channel'}"
        elif g.held:
            send = f"held back ({g.held}{': ' + g.silenced_by if g.silenced_by else ''})"
        else:
            send = "nothing (no change)"
        table.add_row(
            escape(", ".join(f"{k}={v}" for k, v in sorted(g.tags.items())) or "(all)"),
            _value(g.value),
            escape(level),
            g.notified_level.name,
            escape(send),
        )
    if report.groups:
        print_table(out, table, markup=True)
    for g in report.notifications:
        n = g.notification
        assert n is not None
        out.print(
            f"would send [bold]{escape(n.title)}[/bold] to {escape(', '.join(g.channels) or 'no channel')}: "
            f"{escape(n.message)}"
        )
    if not report.notifications:
        out.print("would send nothing")


# ---- list, history, check -------------------------------------------------------------------------


@alerts_app.command("list")
def list_command(
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the alerts firing (or pending) now, the notifications still queued and the active silences."""
    from alerting.state import Level
    from alerting.store import AlertStore

    try:
        cfg = _config(config)
        store = AlertStore(cfg.store_url(_state_dir(state_dir)))
        try:
            states = [s for s in store.states(active_only=True) if s.level > Level.OK or s.pending]
            states.sort(key=lambda s: (-int(s.level), s.rule, sorted(s.tags.items())))
            queued = store.outbox(status="pending")
            silences = store.silences(time.time())
        finally:
            store.close()
    except DaggerError as exc:
        fail(exc)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "firing": [
                        {
                            "rule": s.rule,
                            "kind": s.kind,
                            "tags": s.tags,
                            "level": s.level.name,
                            "pending": s.pending,
                            "raw_level": s.raw_level.name,
                            "since": _iso(s.since),
                            "started_at": _iso(s.started_at),
                            "value": s.value,
                            "notified_level": s.notified_level.name,
                            "flapping": s.flapping,
                            "message": s.message,
                            "fingerprint": s.fingerprint,
                        }
                        for s in states
                    ],
                    "queued": [
                        {
                            "key": q.key,
                            "channel": q.channel,
                            "rule": q.rule,
                            "attempts": q.attempts,
                            "next_attempt_at": _iso(q.next_attempt_at),
                            "last_error": q.last_error,
                        }
                        for q in queued
                    ],
                    "silences": [
                        {
                            "id": s.id,
                            "matchers": [str(m) for m in s.matchers],
                            "ends_at": _iso(s.ends_at),
                            "comment": s.comment,
                        }
                        for s in silences
                    ],
                },
                indent=2,
            )
        )
        return
    out = _out()
    if not states:
        out.print("[green]nothing is firing[/green]")
    else:
        table = Table(title="Firing", title_justify="left")
        for col in ("level", "rule", "group", "value", "since", "notified", "message"):
            table.add_column(col)
        for s in states:
            colour = "red" if s.level == Level.CRIT else "yellow" if s.level == Level.WARN else "dim"
            level = s.level.name if not s.pending else f"{s.level.name}→{s.raw_level.name} pending"
            table.add_row(
                f"[{colour}]{escape(level)}[/{colour}]" + (" flapping" if s.flapping else ""),
                escape(s.rule),
                escape(", ".join(f"{k}={v}" for k, v in sorted(s.tags.items())) or "(all)"),
                _value(s.value),
                _iso(s.since),
                s.notified_level.name,
                escape(s.message),
            )
        print_table(out, table, markup=True)
    if queued:
        out.print(
            f"[yellow]{len(queued)} notifications queued[/yellow] (oldest: {escape(queued[0].key)} to "
            f"{escape(queued[0].channel)}, {queued[0].attempts} tries, next {_iso(queued[0].next_attempt_at)}"
            + (f", last error: {escape(queued[0].last_error)}" if queued[0].last_error else "")
            + ")"
        )
    for sil in silences:
        out.print(
            f"silence {sil.id[:12]} until {_iso(sil.ends_at)}: "
            f"{escape(', '.join(str(m) for m in sil.matchers))}"
            + (f" ({escape(sil.comment)})" if sil.comment else "")
        )


@alerts_app.command("history")
def history_command(
    rule: Annotated[str | None, typer.Argument(help="Only this rule.")] = None,
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
    limit: Annotated[int, typer.Option(help="Lines at most.")] = 50,
) -> None:
    """Show the newest level changes, notifications and deliveries."""
    from alerting.state import Level
    from alerting.store import AlertStore

    try:
        cfg = _config(config)
        store = AlertStore(cfg.store_url(_state_dir(state_dir)))
        try:
            events = store.history(rule, limit)
        finally:
            store.close()
    except DaggerError as exc:
        fail(exc)
    out = _out()
    for e in reversed(events):
        change = ""
        if e.from_level is not None and e.to_level is not None:
            change = f" {Level(e.from_level).name}→{Level(e.to_level).name}"
        out.print(
            f"{_iso(e.at)} {escape(e.rule)} {e.fingerprint[:8]} {escape(e.event)}{change}"
            + (f" {escape(e.detail)}" if e.detail else "")
        )


@alerts_app.command("check")
def check_command(config: ConfigOption = DEFAULT_CONFIG) -> None:
    """Validate the configuration (and its rule files) and summarise it."""
    from alerting.rules import ThresholdRule

    try:
        cfg = _config(config)
    except DaggerError as exc:
        fail(exc)
    out = _out()
    out.print(
        f"[green]OK[/green] {escape(str(config))}: {counted(len(cfg.rules), 'rule')}, {counted(len(cfg.channels), 'channel')}, "
        f"{counted(len(cfg.routes), 'route')}, {counted(len(cfg.silences), 'silence')}"
        + (
            f", platform alerts on {counted(len(cfg.platform.daggers), 'dagger')}"
            if cfg.platform and cfg.platform.enabled
            else ""
        )
    )
    for r in cfg.rules:
        what = (
            ", ".join(f"{s} {c.describe()}" for s, c in r.conditions())
            if isinstance(r, ThresholdRule)
            else r.condition_text()
        )
        out.print(f"  {escape(r.name)} ({r.kind}, team {escape(r.team)}, every {r.every:g}s): {escape(what)}")


# ---- silences -------------------------------------------------------------------------------------


@silence_app.command("add")
def silence_add(
    matchers: Annotated[
        list[str], typer.Argument(help="Label matchers: team=bookings severity=crit city=~Jakarta|Bandung")
    ],
    duration: Annotated[str, typer.Option("--duration", "-d", help="How long: 30m, 2h, 1d.")] = "1h",
    start: Annotated[str, typer.Option(help="When it starts: now or ISO 8601.")] = "now",
    comment: Annotated[str, typer.Option(help="Why.")] = "",
    by: Annotated[str, typer.Option("--by", help="Who asks.")] = "cli",
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
) -> None:
    """Silence the alerts whose labels match every matcher."""
    from alerting.durations import parse_duration
    from alerting.errors import AlertConfigError
    from alerting.matchers import parse_matchers
    from alerting.store import AlertStore, Silence

    try:
        cfg = _config(config)
        try:
            parsed = parse_matchers(matchers)
            seconds = parse_duration(duration)
        except ValueError as exc:
            raise AlertConfigError(str(exc)) from None
        begin = _parse_time(start)
        silence = Silence(
            id=uuid.uuid4().hex,
            matchers=parsed,
            starts_at=begin,
            ends_at=begin + seconds,
            comment=comment,
            created_by=by,
            created_at=time.time(),
            source="cli",
        )
        store = AlertStore(cfg.store_url(_state_dir(state_dir)))
        try:
            store.put_silence(silence)
        finally:
            store.close()
    except DaggerError as exc:
        fail(exc)
    _out().print(
        f"silence {silence.id[:12]} from {_iso(silence.starts_at)} until {_iso(silence.ends_at)}: "
        f"{escape(', '.join(str(m) for m in parsed))}"
    )


@silence_app.command("list")
def silence_list(
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
    expired: Annotated[bool, typer.Option(help="Also show silences that ended.")] = False,
) -> None:
    """List silences (active and future; with --expired also past ones)."""
    from alerting.store import AlertStore

    try:
        cfg = _config(config)
        store = AlertStore(cfg.store_url(_state_dir(state_dir)))
        try:
            found = store.silences()
        finally:
            store.close()
    except DaggerError as exc:
        fail(exc)
    now = time.time()
    out = _out()
    shown = [s for s in found if expired or s.ends_at > now]
    if not shown:
        out.print("no silences")
    for s in shown:
        state = "active" if s.active(now) else "ended" if s.ends_at <= now else "future"
        out.print(
            f"{s.id[:12]} {state} {_iso(s.starts_at)} → {_iso(s.ends_at)} [{s.source}] "
            f"{escape(', '.join(str(m) for m in s.matchers))}"
            + (f" ({escape(s.comment)})" if s.comment else "")
        )


@silence_app.command("expire")
def silence_expire(
    silence_id: Annotated[str, typer.Argument(help="The silence id (or a unique prefix of it).")],
    config: ConfigOption = DEFAULT_CONFIG,
    state_dir: StateDirOption = None,
) -> None:
    """End a silence now."""
    from alerting.errors import AlertConfigError
    from alerting.store import AlertStore

    try:
        cfg = _config(config)
        store = AlertStore(cfg.store_url(_state_dir(state_dir)))
        try:
            ok = store.expire_silence(silence_id, time.time())
        finally:
            store.close()
        if not ok:
            raise AlertConfigError(
                f"no single silence has id {silence_id!r}", hint="see daggers alerts silence list"
            )
    except DaggerError as exc:
        fail(exc)
    _out().print(f"silence {escape(silence_id)} expired")


def register(app: typer.Typer) -> None:
    """Add the ``alerts`` command group (run, test, list, check, history, silence) to ``app``."""
    app.add_typer(alerts_app, name="alerts")


__all__ = ["alerts_app", "register"]
