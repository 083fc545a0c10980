"""The alert engine: evaluates rules and platform checks, keeps alert state, queues and delivers notifications.

:class:`AlertEngine` can be driven two ways:

* by hand (tests, ``daggers alerts test``): :meth:`AlertEngine.evaluate_rule` for any moment,
  :meth:`AlertEngine.evaluate_platform`, :meth:`AlertEngine.dispatch`;
* by APScheduler 3.11 (``daggers alerts run``): :meth:`AlertEngine.start` schedules one interval job
  per rule, one for platform checks, one that delivers the outbox and one that prunes old history, in
  a SQLAlchemyJobStore inside the alert store. A restart keeps each job's next run time, and alert
  state, history and the outbox are in the same store, so a restart neither re-sends what was sent
  nor forgets what is firing. A lease in the store keeps a second engine off the same store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from alerting import secrets
from alerting.config import AlertsConfig
from alerting.errors import AlertQueryError, EngineBusyError, StoreError
from alerting.health import (
    CheckpointHealthSource,
    DaggerHealthSource,
    Finding,
    RegistryHealthSource,
    judge,
    sample_of,
)
from alerting.influxql import GroupValue, InfluxReader, count_query, threshold_query
from alerting.matchers import parse_matchers
from alerting.notifiers import Notification, Notifier, build_notifiers
from alerting.outbox import Backoff, Dispatcher, DispatchReport
from alerting.routing import Router
from alerting.rules import VERSUS_SECONDS, DeadmanRule, FlappingSpec, ThresholdRule
from alerting.state import AlertState, Level, decide, dedup_key, fingerprint, mark_notified, step
from alerting.store import AlertStore, HistoryEvent, OutboxItem, Silence, new_holder
from alerting.template import render
from job.common.words import counted

log = logging.getLogger("daggers.alerts")

JOB_TABLE = "alert_scheduler_jobs"
_ENGINES: dict[str, AlertEngine] = {}


# ---- APScheduler job functions (module level: the job store keeps references to them) ------------


def run_rule_job(engine_id: str, rule: str) -> None:
    """Evaluate ``rule`` on the running engine ``engine_id`` (an APScheduler job)."""
    engine = _ENGINES.get(engine_id)
    if engine is not None:
        engine.scheduled_rule(rule)


def run_platform_job(engine_id: str) -> None:
    """Check the daggers' health on the running engine (an APScheduler job)."""
    engine = _ENGINES.get(engine_id)
    if engine is not None:
        engine.scheduled_platform()


def run_dispatch_job(engine_id: str) -> None:
    """Renew the lease and deliver due notifications (an APScheduler job)."""
    engine = _ENGINES.get(engine_id)
    if engine is not None:
        engine.scheduled_dispatch()


def run_housekeeping_job(engine_id: str) -> None:
    """Prune old history and delivered notifications (an APScheduler job)."""
    engine = _ENGINES.get(engine_id)
    if engine is not None:
        engine.scheduled_housekeeping()


# ---- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupResult:
    """What an evaluation found for one group: its raw level and the values the message shows."""

    tags: dict[str, str]
    raw: Level
    value: float | None
    condition: str
    past_value: float | None = None
    change_pct: float | None = None
    message: str | None = None  # pre-rendered (platform checks); rules render their template
    extra: dict[str, Any] = field(default_factory=dict)
    holding: dict[int, str] = field(default_factory=dict)  # level -> the condition of that level that holds

    def condition_at(self, level: Level) -> str:
        """Return the condition that explains ``level`` (a pending raw level is said so)."""
        if level > Level.OK:
            return self.holding.get(int(level), self.condition)
        return f"pending: {self.condition}" if self.raw > Level.OK else self.condition


@dataclass(frozen=True)
class GroupOutcome:
    """One group after an evaluation: its level, and the notification sent or held back (if any)."""

    fingerprint: str
    tags: dict[str, str]
    value: float | None
    raw_level: Level
    level: Level
    previous_level: Level
    notified_level: Level
    pending: bool
    flapping: bool
    message: str
    notification: Notification | None = None
    channels: tuple[str, ...] = ()
    held: str | None = None
    silenced_by: str | None = None


@dataclass(frozen=True)
class EvaluationReport:
    """What one evaluation of a rule (or of the platform checks) did."""

    rule: str
    at: float
    queries: tuple[str, ...]
    groups: tuple[GroupOutcome, ...]
    queued: int = 0
    dry_run: bool = False

    @property
    def notifications(self) -> list[GroupOutcome]:
        """The groups that sent (or, in a dry run, would send) a notification."""
        return [g for g in self.groups if g.notification is not None]


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


# ---- the engine ----------------------------------------------------------------------------------


class AlertEngine:
    """Evaluates the rules of an :class:`AlertsConfig` against InfluxDB and the daggers' health."""

    def __init__(
        self,
        config: AlertsConfig,
        *,
        state_dir: Path | None = None,
        store: AlertStore | None = None,
        reader: InfluxReader | None = None,
        health: DaggerHealthSource | None = None,
        notifiers: dict[str, Notifier] | None = None,
        clock: Callable[[], float] = time.time,
        engine_id: str = "default",
    ) -> None:
        """Open the store and build the notifiers.

        Raises:
            StoreError: the store cannot be opened.
        """
        from job.stack.local import default_state_dir

        self.config = config
        self.clock = clock
        self.engine_id = engine_id
        self.state_dir = state_dir or default_state_dir()
        self.store = store or AlertStore(config.store_url(self.state_dir))
        influx = config.influx
        self.reader = reader or InfluxReader(
            influx.url,
            influx.database,
            username=influx.username,
            password=influx.password.get_secret_value() if influx.password else None,
            timeout=influx.timeout,
        )
        self.notifiers = notifiers if notifiers is not None else build_notifiers(config)
        self.router = Router.from_config(config)
        self.redact = secrets.Redactor([s for n in self.notifiers.values() for s in n.secrets()])
        self.redact.add([influx.password, self.store.url.password])
        self._filters = secrets.install(self.redact)
        self.dispatcher = Dispatcher(
            self.store,
            self.notifiers,
            backoff=Backoff.from_spec(config.delivery),
            give_up_after=config.delivery.give_up_after,
            batch=config.delivery.batch,
            redact=self.redact,
            clock=clock,
        )
        self._health = health
        self._scheduler: Any = None
        self._holder = new_holder()
        self._stopped = threading.Event()
        self.sync_silences()

    # ---- silences ---------------------------------------------------------------------------

    def sync_silences(self) -> None:
        """Make the store's config silences those of the config file (silences added by CLI stay)."""
        self.store.sync_config_silences(
            [
                Silence(
                    id=s.silence_id(),
                    matchers=parse_matchers(s.matchers),
                    starts_at=s.starts_at.timestamp(),
                    ends_at=s.ends_at.timestamp(),
                    comment=s.comment,
                    created_by=s.created_by,
                    source="config",
                )
                for s in self.config.silences
            ]
        )

    # ---- evaluating rules -------------------------------------------------------------------

    def evaluate_rule(
        self, name: str, at: float | None = None, *, dry_run: bool = False, dispatch: bool = True
    ) -> EvaluationReport:
        """Evaluate rule ``name`` as of ``at`` (default now), update its alerts and queue notifications.

        With ``dry_run`` nothing is stored or sent: the report says what would be. With ``dispatch``
        the queued notifications are delivered at once (a failed one stays queued for retries).

        Raises:
            AlertConfigError: no such rule.
            AlertQueryError: InfluxDB could not run the rule's query.
            StoreError: the store failed (the evaluation is not recorded and will run again).
        """
        rule = self.config.rule(name)
        at = self.clock() if at is None else at
        states = {s.fingerprint: s for s in self.store.states(rule.name)}
        if isinstance(rule, ThresholdRule):
            results, queries = self._threshold(rule, at, states)
        else:
            results, queries = self._deadman(rule, at, states)
        labels = {**rule.labels}
        if isinstance(rule, DeadmanRule) and rule.dagger:
            labels["dagger"] = rule.dagger
        return self._apply(
            rule.name,
            "rule",
            rule.team,
            labels,
            results,
            at,
            rule.for_,
            rule.flapping,
            rule.message,
            states,
            queries,
            dry_run=dry_run,
            dispatch=dispatch,
            extra_values=self._rule_values(rule),
        )

    def _rule_values(self, rule: ThresholdRule | DeadmanRule) -> dict[str, Any]:
        values: dict[str, Any] = {"measurement": rule.measurement or ""}
        if isinstance(rule, DeadmanRule) and rule.dagger:
            values["dagger"] = rule.dagger
        return values

    def _threshold(
        self, rule: ThresholdRule, at: float, states: dict[str, AlertState]
    ) -> tuple[list[GroupResult], list[str]]:
        end = at - rule.offset
        start = end - rule.window
        q = threshold_query(rule, start, end, self.config.influx.database)
        queries = [q]
        current = self.reader.query(q, rule.database)
        past: dict[str, dict[tuple[tuple[str, str], ...], float | None]] = {}
        for versus in sorted(rule.versus()):
            shift = VERSUS_SECONDS[versus]
            pq = threshold_query(rule, start - shift, end - shift, self.config.influx.database)
            queries.append(pq)
            past[versus] = {g.key(): g.value for g in self.reader.query(pq, rule.database)}
        results: list[GroupResult] = []
        seen: set[str] = set()
        for group in current:
            if group.value is None:
                continue
            seen.add(fingerprint(rule.name, group.tags))
            results.append(self._judge_threshold(rule, group, past))
        for fp, state in states.items():
            if fp in seen or state.kind != "rule":
                continue
            raw = {"ok": Level.OK, "keep": state.raw_level, "warn": Level.WARN, "crit": Level.CRIT}[
                rule.on_no_data
            ]
            results.append(GroupResult(dict(state.tags), raw, None, f"no data ({rule.on_no_data})"))
        return results, queries

    def _judge_threshold(
        self,
        rule: ThresholdRule,
        group: GroupValue,
        past: dict[str, dict[tuple[tuple[str, str], ...], float | None]],
    ) -> GroupResult:
        value = group.value
        past_value: float | None = None
        change: float | None = None
        holding: dict[int, str] = {}
        for severity, cond in rule.conditions():
            p = past.get(cond.versus, {}).get(group.key()) if cond.versus else None
            if cond.versus and past_value is None:
                past_value, change = p, cond.subject(value, p)
            if cond.holds(value, p):
                holding[int(Level.of(severity))] = cond.describe()
        raw = Level(max(holding, default=0))
        return GroupResult(
            group.tags,
            raw,
            value,
            holding.get(int(raw), "no condition holds"),
            past_value,
            change,
            holding=holding,
        )

    def _deadman(
        self, rule: DeadmanRule, at: float, states: dict[str, AlertState]
    ) -> tuple[list[GroupResult], list[str]]:
        end = at - rule.offset
        q = count_query(rule, end - rule.period, end, self.config.influx.database)
        queries = [q]
        recent = {
            g.key(): max((v for v in g.columns.values() if v is not None), default=0.0)
            for g in self.reader.query(q, rule.database)
        }
        groups: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        if rule.group_by:
            lq = count_query(rule, end - rule.lookback, end, self.config.influx.database)
            queries.append(lq)
            for g in self.reader.query(lq, rule.database):
                groups[g.key()] = g.tags
            for state in states.values():
                groups.setdefault(tuple(sorted(state.tags.items())), dict(state.tags))
            for key in recent:
                groups.setdefault(key, dict(key))
        else:
            groups[()] = {}
        fire = Level.of(rule.severity)
        results = []
        for key, tags in groups.items():
            count = recent.get(key, 0.0) or 0.0
            if count > 0:
                results.append(
                    GroupResult(
                        tags,
                        Level.OK,
                        count,
                        f"{counted(round(count), 'point')} in the last "
                        f"{rule.condition_text().removeprefix('no data for ')}",
                    )
                )
            else:
                results.append(GroupResult(tags, fire, 0.0, rule.condition_text()))
        return results, queries

    # ---- applying results -------------------------------------------------------------------

    def _apply(
        self,
        rule: str,
        kind: str,
        team: str,
        labels: dict[str, str],
        results: list[GroupResult],
        at: float,
        pending_s: float,
        flapping: FlappingSpec | None,
        template: str,
        states: dict[str, AlertState],
        queries: list[str],
        *,
        dry_run: bool,
        dispatch: bool,
        extra_values: dict[str, Any] | None = None,
    ) -> EvaluationReport:
        silences = self.store.silences(at)
        changed: list[AlertState] = []
        history: list[HistoryEvent] = []
        items: list[OutboxItem] = []
        outcomes: list[GroupOutcome] = []
        now = self.clock()
        for res in results:
            fp = fingerprint(rule, res.tags)
            state = states.get(fp)
            known = state is not None
            all_labels = {**labels, **res.tags, "alertname": rule, "rule": rule, "team": team}
            if state is None:
                state = AlertState(
                    fp,
                    rule,
                    kind="platform" if kind == "platform" else "rule",
                    labels=all_labels,
                    tags=dict(res.tags),
                )
            else:
                state.labels = all_labels
            before_notified = state.notified_level
            result = step(state, res.raw, at, pending_s, flapping)
            state.value = res.value
            state.past_value = res.past_value
            state.condition = res.condition_at(state.level)
            state.message = (
                res.message
                if res.message is not None
                else render(template, self._values(state, res, team, extra_values or {}, at))
            )
            if result.changed:
                history.append(
                    HistoryEvent(
                        at,
                        fp,
                        rule,
                        "state",
                        int(result.previous),
                        int(result.level),
                        res.value,
                        state.condition,
                    )
                )
            if result.flapping:
                history.append(
                    HistoryEvent(
                        at, fp, rule, f"flapping_{result.flapping}", None, int(result.level), res.value
                    )
                )
            silence = next((s for s in silences if s.matches(state.severity_labels())), None)
            decision = decide(state, silence is not None)
            notification = None
            channels: tuple[str, ...] = ()
            held = None
            if decision is not None and decision.notify:
                seq = mark_notified(state)
                notification = self._notification(state, res, team, kind, before_notified, seq, at)
                channels = tuple(self.router.channels(notification.labels))
                for ch in channels:
                    items.append(
                        OutboxItem(
                            key=f"{notification.id}:{ch}",
                            channel=ch,
                            fingerprint=fp,
                            rule=rule,
                            payload=notification.model_dump(mode="json"),
                            created_at=now,
                            next_attempt_at=now,
                        )
                    )
                history.append(
                    HistoryEvent(
                        at,
                        fp,
                        rule,
                        "notify",
                        int(decision.previous),
                        int(decision.level),
                        res.value,
                        ", ".join(channels) or "no channel routed",
                    )
                )
                if not channels:
                    log.warning(
                        "%s %s: no route and no default channel; the notification goes nowhere",
                        rule,
                        _tags_text(res.tags),
                    )
            elif decision is not None:
                held = decision.held
                if result.changed or result.flapping:
                    history.append(
                        HistoryEvent(
                            at,
                            fp,
                            rule,
                            f"held_{held}",
                            int(decision.previous),
                            int(decision.level),
                            res.value,
                            silence.id if silence else "",
                        )
                    )
            if known or state.level or state.raw_level or state.notified_level or state.flapping:
                changed.append(state)
            outcomes.append(
                GroupOutcome(
                    fp,
                    dict(res.tags),
                    res.value,
                    state.raw_level,
                    state.level,
                    result.previous,
                    state.notified_level,
                    state.pending,
                    state.flapping,
                    state.message,
                    notification,
                    channels,
                    held,
                    silence.id if silence else None,
                )
            )
        queued = 0
        if not dry_run:
            queued = self.store.commit_evaluation(changed, history, items)
            for o in outcomes:
                if o.notification is not None:
                    log.info(
                        "%s %s: %s → %s, queued for %s",
                        rule,
                        _tags_text(o.tags),
                        o.notification.previous_level,
                        o.level.name,
                        ", ".join(o.channels) or "no channel",
                    )
            if queued and dispatch:
                self.dispatch()
        return EvaluationReport(rule, at, tuple(queries), tuple(outcomes), queued, dry_run)

    def _values(
        self, state: AlertState, res: GroupResult, team: str, extra: dict[str, Any], at: float
    ) -> dict[str, Any]:
        values: dict[str, Any] = {**extra, **state.labels, **res.tags, **res.extra}
        values.update(
            rule=state.rule,
            team=team,
            level=state.level.name,
            previous_level=state.notified_level.name,
            status="resolved" if state.level == Level.OK else "firing",
            value=res.value,
            past_value=res.past_value,
            change_pct=res.change_pct,
            condition=state.condition,
            tags=_tags_text(res.tags),
            since=_iso(state.since),
            at=_iso(at),
        )
        rule = self._rule_or_none(state.rule)
        if isinstance(rule, ThresholdRule) and rule.field:
            values[rule.field] = res.value
        return values

    def _rule_or_none(self, name: str) -> ThresholdRule | DeadmanRule | None:
        return next((r for r in self.config.rules if r.name == name), None)

    def _notification(
        self, state: AlertState, res: GroupResult, team: str, kind: str, previous: Level, seq: int, at: float
    ) -> Notification:
        level = state.level
        labels = state.severity_labels(level if level > Level.OK else previous)
        return Notification(
            id=f"{state.fingerprint}:{seq}",
            rule=state.rule,
            kind="platform" if kind == "platform" else "rule",
            # a Level's name is OK, WARN or CRIT: the Literal the notification takes
            team=team,
            status="resolved" if level == Level.OK else "firing",
            level=level.name,  # type: ignore[arg-type]
            previous_level=previous.name,  # type: ignore[arg-type]
            labels=labels,
            tags=dict(res.tags),
            value=res.value,
            condition=state.condition,
            message=state.message,
            fingerprint=state.fingerprint,
            dedup_key=dedup_key(state.rule, state.fingerprint),
            started_at=state.started_at,
            at=at,
        )

    def retire_removed_rules(self) -> int:
        """Resolve and forget the alerts of rules no longer in the configuration; return how many were resolved.

        An alert that was notified (WARN or CRIT) gets a resolve saying its rule was removed, so no incident
        stays open in PagerDuty or elsewhere. Safe to repeat after a crash (the resolve has a stable id).
        """
        configured = {r.name for r in self.config.rules}
        orphans = [s for s in self.store.states() if s.kind == "rule" and s.rule not in configured]
        if not orphans:
            return 0
        now = self.clock()
        items: list[OutboxItem] = []
        history: list[HistoryEvent] = []
        resolved = 0
        for state in orphans:
            if state.notified_level > Level.OK:
                previous = state.notified_level
                state.level = Level.OK
                state.condition = "the rule was removed"
                state.message = f"{state.rule} was removed from the configuration: its alert is resolved"
                seq = mark_notified(state)
                res = GroupResult(dict(state.tags), Level.OK, None, state.condition)
                team = state.labels.get("team", "")
                n = self._notification(state, res, team, "rule", previous, seq, now)
                channels = self.router.channels(n.labels)
                items += [
                    OutboxItem(
                        key=f"{n.id}:{ch}",
                        channel=ch,
                        fingerprint=state.fingerprint,
                        rule=state.rule,
                        payload=n.model_dump(mode="json"),
                        created_at=now,
                        next_attempt_at=now,
                    )
                    for ch in channels
                ]
                history.append(
                    HistoryEvent(
                        now,
                        state.fingerprint,
                        state.rule,
                        "notify",
                        int(previous),
                        0,
                        None,
                        "rule removed: " + (", ".join(channels) or "no channel routed"),
                    )
                )
                resolved += 1
        self.store.commit_evaluation([], history, items)
        self.store.delete_states([s.fingerprint for s in orphans])
        log.info(
            "forgot %s of removed rules (%s queued)",
            counted(len(orphans), "alert"),
            counted(resolved, "resolve"),
        )
        return resolved

    # ---- platform ---------------------------------------------------------------------------

    def health_source(self) -> DaggerHealthSource | None:
        """Return the health source (built from ``platform.daggers`` when none was given)."""
        if self._health is None and self.config.platform is not None and self.config.platform.enabled:
            if self.config.platform.registry:
                self._health = RegistryHealthSource.from_url(
                    self.config.platform.registry, self.config.platform.registry_user
                )
                return self._health
            self._health = CheckpointHealthSource.from_platform(
                self.config.platform, self.config.resolve, self.config.platform_state_dir(self.state_dir)
            )
        return self._health

    def evaluate_platform(
        self, at: float | None = None, *, dry_run: bool = False, dispatch: bool = True
    ) -> list[EvaluationReport]:
        """Judge every watched dagger's health (see :mod:`alerting.health`); one report per check.

        Raises:
            StoreError: the store failed.
            job.errors.SpecError: a watched dagger's spec file is missing or invalid.
        """
        spec = self.config.platform
        source = self.health_source()
        if spec is None or not spec.enabled or source is None:
            return []
        at = self.clock() if at is None else at
        by_check: dict[str, list[Finding]] = {}
        samples = []
        seen: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
        for h in source.daggers():
            for f in judge(h, self.store.health_sample(h.name), spec, at):
                key = (f.check, f.team, tuple(sorted((f.group or {"dagger": f.dagger}).items())))
                if key not in seen:  # a cluster's finding comes with each of its daggers: once
                    seen.add(key)
                    by_check.setdefault(f.check, []).append(f)
            samples.append(sample_of(h, at))
        reports = []
        for check, findings in sorted(by_check.items()):
            states = {s.fingerprint: s for s in self.store.states(check)}
            teams = {f.team for f in findings}
            for team in sorted(teams):
                results = [
                    GroupResult(
                        f.group or {"dagger": f.dagger}, f.level, f.value, f.condition, message=f.message
                    )
                    for f in findings
                    if f.team == team
                ]
                reports.append(
                    self._apply(
                        check,
                        "platform",
                        team,
                        {**spec.labels, "kind": "platform"},
                        results,
                        at,
                        spec.for_,
                        None,
                        "",
                        states,
                        [],
                        dry_run=dry_run,
                        dispatch=dispatch,
                    )
                )
        if not dry_run:
            for sample in samples:
                self.store.put_health_sample(sample)
        return reports

    # ---- delivery and queries ---------------------------------------------------------------

    def dispatch(self) -> DispatchReport:
        """Deliver every due notification now (see :class:`alerting.outbox.Dispatcher`)."""
        return self.dispatcher.dispatch()

    def firing(self) -> list[AlertState]:
        """Return the alerts that are WARN or CRIT now, or pending, worst first."""
        active = [s for s in self.store.states(active_only=True) if s.level > Level.OK or s.pending]
        return sorted(active, key=lambda s: (-int(s.level), s.rule, sorted(s.tags.items())))

    # ---- scheduling -------------------------------------------------------------------------

    def _jobs(self) -> dict[str, tuple[Callable[..., None], float, tuple[str, ...]]]:
        jobs: dict[str, tuple[Callable[..., None], float, tuple[str, ...]]] = {
            f"rule:{r.name}": (run_rule_job, r.every, (self.engine_id, r.name)) for r in self.config.rules
        }
        if (
            self.config.platform is not None
            and self.config.platform.enabled
            and (self.config.platform.daggers or self.config.platform.registry)
        ):
            jobs["platform"] = (run_platform_job, self.config.platform.every, (self.engine_id,))
        jobs["dispatch"] = (run_dispatch_job, self.config.delivery.dispatch_interval, (self.engine_id,))
        jobs["housekeeping"] = (run_housekeeping_job, 3600.0, (self.engine_id,))
        return jobs

    def start(self) -> None:
        """Take the store's lease and start the scheduler (jobs run in background threads).

        Raises:
            EngineBusyError: another engine runs on this store.
            StoreError: the store failed.
            MissingDependencyError: APScheduler (the alerting extra) is not installed.
        """
        from job.common.optional import require

        require("apscheduler", "alerting", needed_by="the alert engine")
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        if self._scheduler is not None:
            return
        self.store.acquire_lease(self._holder, self._lease_ttl(), time.time())
        self.retire_removed_rules()
        _ENGINES[self.engine_id] = self
        scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=self.store.engine, tablename=JOB_TABLE)},
            executors={"default": ThreadPoolExecutor(4)},
            job_defaults={"coalesce": True, "max_instances": 1},
            timezone=UTC,
        )
        scheduler.start(paused=True)
        wanted = self._jobs()
        for job in scheduler.get_jobs():
            if job.id not in wanted:
                log.info("removing the scheduled job %s (no longer configured)", job.id)
                job.remove()
        now = datetime.now(UTC)
        for job_id, (func, every, args) in wanted.items():
            job = scheduler.get_job(job_id)
            same = (
                job is not None
                and isinstance(job.trigger, IntervalTrigger)
                and job.trigger.interval == timedelta(seconds=every)
                and tuple(job.args) == args
                and job.func is func
                and job.misfire_grace_time is None
            )
            if same:
                continue  # keeps its next run time across restarts
            first = now if job_id == "dispatch" else now + timedelta(seconds=every)
            scheduler.add_job(
                func,
                IntervalTrigger(seconds=every, timezone=UTC),
                id=job_id,
                name=job_id,
                args=list(args),
                replace_existing=True,
                next_run_time=first,
                misfire_grace_time=None,
                coalesce=True,
                max_instances=1,
            )
        self._scheduler = scheduler
        self._stopped.clear()
        scheduler.resume()
        log.info(
            "alert engine started: %s, store %s", counted(len(self.config.rules), "rule"), self.store.safe_url
        )

    def _lease_ttl(self) -> float:
        return max(self.config.store.lease_ttl, 3 * self.config.delivery.dispatch_interval)

    def stop(self) -> None:
        """Stop the scheduler (waiting for running evaluations) and give the lease up."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            scheduler.shutdown(wait=True)
            _ENGINES.pop(self.engine_id, None)
            try:
                self.store.release_lease(self._holder)
            except StoreError as exc:
                log.warning("could not release the engine lease: %s", exc.message)
            log.info("alert engine stopped")
        self._stopped.set()

    def close(self) -> None:
        """Stop, and release the store, the InfluxDB session, the notifiers and the log filters."""
        self.stop()
        for n in self.notifiers.values():
            n.close()
        self.reader.close()
        self.store.close()
        secrets.uninstall(self._filters)

    @property
    def running(self) -> bool:
        """True while the scheduler runs."""
        return self._scheduler is not None

    def run_forever(self, stop: threading.Event) -> None:
        """Start, run until ``stop`` is set, then stop."""
        self.start()
        try:
            while not stop.wait(0.5) and self._scheduler is not None:
                pass
        finally:
            self.stop()

    def scheduled_rule(self, name: str) -> None:
        """Evaluate a rule from the scheduler: problems are logged (redacted), never raised."""
        try:
            self.evaluate_rule(name)
        except AlertQueryError as exc:
            log.warning("rule %s not evaluated: %s", name, self.redact(exc.message))
        except StoreError as exc:
            log.error("rule %s not recorded: %s", name, self.redact(exc.message))
        except Exception as exc:  # a scheduled job must never die silently
            log.error("rule %s failed: %s", name, self.redact(f"{type(exc).__name__}: {exc}"))

    def scheduled_platform(self) -> None:
        """Check platform health from the scheduler: problems are logged, never raised."""
        try:
            self.evaluate_platform()
        except Exception as exc:
            log.error(
                "platform checks failed: %s",
                self.redact(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"),
            )

    def scheduled_dispatch(self) -> None:
        """Renew the lease and deliver due notifications; stop the engine when the lease is lost."""
        try:
            self.store.acquire_lease(self._holder, self._lease_ttl(), time.time())
        except EngineBusyError as exc:
            log.error("the engine lost its lease and stops: %s", exc.message)
            threading.Thread(target=self.stop, daemon=True).start()
            return
        except StoreError as exc:
            log.error("lease not renewed: %s", self.redact(exc.message))
        try:
            self.dispatch()
        except Exception as exc:
            log.error(
                "delivery round failed: %s",
                self.redact(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"),
            )

    def scheduled_housekeeping(self) -> None:
        """Delete history and finished notifications older than the retention."""
        try:
            removed = self.store.prune(time.time() - self.config.store.history_retention)
            if removed:
                log.info("pruned %d old history lines and notifications", removed)
        except StoreError as exc:
            log.error("pruning failed: %s", self.redact(exc.message))


def _tags_text(tags: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or "(no tags)"
