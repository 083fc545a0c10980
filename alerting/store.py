"""The alert store: state, history, outbox, silences, health samples and the engine lease (SQLAlchemy 2).

SQLite by default (one file; fine for one engine), PostgreSQL when the state is shared (another
host can take over). An evaluation's new states, its history and the notifications it queues are
written in **one transaction**: a crash either loses the whole evaluation (it runs again) or keeps
it all, so a notification is never queued twice nor lost. Times are epoch seconds (floats).

The store URL may carry a password: only :attr:`AlertStore.safe_url` (password hidden) is ever shown.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from alerting.errors import EngineBusyError, StoreError
from alerting.matchers import Matcher, parse_matchers
from alerting.state import AlertState, Level
from job.stack.process import pid_alive

metadata = sa.MetaData()

alert_states = sa.Table(
    "alert_states",
    metadata,
    sa.Column("fingerprint", sa.String(64), primary_key=True),
    sa.Column("rule", sa.String(200), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("labels", sa.JSON, nullable=False),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("level", sa.Integer, nullable=False),
    sa.Column("raw_level", sa.Integer, nullable=False),
    sa.Column("warn_since", sa.Double),
    sa.Column("crit_since", sa.Double),
    sa.Column("since", sa.Double),
    sa.Column("started_at", sa.Double),
    sa.Column("value", sa.Double),
    sa.Column("past_value", sa.Double),
    sa.Column("flapping", sa.Boolean, nullable=False),
    sa.Column("history", sa.JSON, nullable=False),
    sa.Column("notified_level", sa.Integer, nullable=False),
    sa.Column("notify_seq", sa.Integer, nullable=False),
    sa.Column("last_eval", sa.Double),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("condition", sa.Text, nullable=False),
)

alert_history = sa.Table(
    "alert_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Double, nullable=False, index=True),
    sa.Column("fingerprint", sa.String(64), nullable=False, index=True),
    sa.Column("rule", sa.String(200), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("from_level", sa.Integer),
    sa.Column("to_level", sa.Integer),
    sa.Column("value", sa.Double),
    sa.Column("detail", sa.Text, nullable=False, default=""),
)

outbox = sa.Table(
    "alert_outbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False, unique=True),
    sa.Column("channel", sa.String(100), nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("rule", sa.String(200), nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", sa.Double, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("last_error", sa.Text),
    sa.Column("sent_at", sa.Double),
)

silences = sa.Table(
    "alert_silences",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("matchers", sa.JSON, nullable=False),
    sa.Column("starts_at", sa.Double, nullable=False),
    sa.Column("ends_at", sa.Double, nullable=False),
    sa.Column("comment", sa.Text, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
)

health_samples = sa.Table(
    "alert_health_samples",
    metadata,
    sa.Column("dagger", sa.String(200), primary_key=True),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("values", sa.JSON, nullable=False),
)

leases = sa.Table(
    "alert_engine_lease",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(300), nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
)


@dataclass(frozen=True)
class HistoryEvent:
    """One line of an alert's history: a level change, a notification queued or held back, a delivery."""

    at: float
    fingerprint: str
    rule: str
    event: str
    from_level: int | None = None
    to_level: int | None = None
    value: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class OutboxItem:
    """A notification for one channel, waiting in (or done with) the outbox."""

    key: str
    channel: str
    fingerprint: str
    rule: str
    payload: dict[str, Any]
    created_at: float
    next_attempt_at: float
    attempts: int = 0
    status: str = "pending"
    last_error: str | None = None
    sent_at: float | None = None
    id: int | None = None


@dataclass(frozen=True)
class Silence:
    """Notifications of matching alerts are held back from ``starts_at`` to ``ends_at``."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float
    comment: str = ""
    created_by: str = ""
    created_at: float = 0.0
    source: str = "cli"

    def active(self, at: float) -> bool:
        """Return True when the silence is in force at ``at``."""
        return self.starts_at <= at < self.ends_at

    def matches(self, labels: dict[str, str]) -> bool:
        """Return True when every matcher matches ``labels``."""
        return all(m.matches(labels) for m in self.matchers)


@dataclass
class HealthSample:
    """The counters of one dagger at one check (to compute rates between checks)."""

    dagger: str
    at: float
    values: dict[str, float] = field(default_factory=dict)


def _state_row(s: AlertState) -> dict[str, Any]:
    return {
        "fingerprint": s.fingerprint,
        "rule": s.rule,
        "kind": s.kind,
        "labels": s.labels,
        "tags": s.tags,
        "level": int(s.level),
        "raw_level": int(s.raw_level),
        "warn_since": s.warn_since,
        "crit_since": s.crit_since,
        "since": s.since,
        "started_at": s.started_at,
        "value": s.value,
        "past_value": s.past_value,
        "flapping": s.flapping,
        "history": list(s.history),
        "notified_level": int(s.notified_level),
        "notify_seq": s.notify_seq,
        "last_eval": s.last_eval,
        "message": s.message,
        "condition": s.condition,
    }


def _state_of(row: Any) -> AlertState:
    m = row._mapping
    return AlertState(
        fingerprint=m["fingerprint"],
        rule=m["rule"],
        kind=m["kind"],
        labels=dict(m["labels"]),
        tags=dict(m["tags"]),
        level=Level(m["level"]),
        raw_level=Level(m["raw_level"]),
        warn_since=m["warn_since"],
        crit_since=m["crit_since"],
        since=m["since"],
        started_at=m["started_at"],
        value=m["value"],
        past_value=m["past_value"],
        flapping=bool(m["flapping"]),
        history=list(m["history"]),
        notified_level=Level(m["notified_level"]),
        notify_seq=m["notify_seq"],
        last_eval=m["last_eval"],
        message=m["message"],
        condition=m["condition"],
    )


def _outbox_of(row: Any) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        id=m["id"],
        key=m["key"],
        channel=m["channel"],
        fingerprint=m["fingerprint"],
        rule=m["rule"],
        payload=dict(m["payload"]),
        created_at=m["created_at"],
        attempts=m["attempts"],
        next_attempt_at=m["next_attempt_at"],
        status=m["status"],
        last_error=m["last_error"],
        sent_at=m["sent_at"],
    )


def _silence_of(row: Any) -> Silence:
    m = row._mapping
    return Silence(
        id=m["id"],
        matchers=parse_matchers(m["matchers"]),
        starts_at=m["starts_at"],
        ends_at=m["ends_at"],
        comment=m["comment"],
        created_by=m["created_by"],
        created_at=m["created_at"],
        source=m["source"],
    )


class AlertStore:
    """All persisted alerting data, behind one SQLAlchemy engine. Safe to use from several threads."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Open (and with ``create``, create the tables of) the store at SQLAlchemy ``url``.

        Raises:
            StoreError: the URL is malformed, its driver is missing, or the database cannot be reached.
        """
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise StoreError(
                "the alert store URL is not a SQLAlchemy URL (e.g. sqlite:///alerts.db or "
                "postgresql+psycopg://user@host/db)"
            ) from None
        self.url = parsed
        self.safe_url = parsed.render_as_string(hide_password=True)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {"future": True, "pool_pre_ping": True}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
        try:
            self.engine: Engine = sa.create_engine(parsed, **kwargs)
            if self.is_sqlite:
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            if create:
                metadata.create_all(self.engine)
        except (SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot open the alert store {self.safe_url}: {_reason(exc)}") from None
        self._write_lock = threading.Lock() if self.is_sqlite else None

    def __repr__(self) -> str:
        return f"AlertStore({self.safe_url!r})"

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        """A transaction; SQLite writers are serialised in-process (SQLite has one writer anyway)."""
        lock = self._write_lock or contextlib.nullcontext()
        try:
            with lock, self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"the alert store {self.safe_url} failed: {_reason(exc)}") from None

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"the alert store {self.safe_url} failed: {_reason(exc)}") from None

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # ---- alert state ------------------------------------------------------------------------

    def states(self, rule: str | None = None, *, active_only: bool = False) -> list[AlertState]:
        """Return the stored states (of ``rule``; with ``active_only``, those not OK or not yet notified OK)."""
        q = sa.select(alert_states)
        if rule is not None:
            q = q.where(alert_states.c.rule == rule)
        if active_only:
            q = q.where(
                sa.or_(
                    alert_states.c.level > 0, alert_states.c.notified_level > 0, alert_states.c.raw_level > 0
                )
            )
        with self._read() as conn:
            return [
                _state_of(r)
                for r in conn.execute(q.order_by(alert_states.c.rule, alert_states.c.fingerprint))
            ]

    def commit_evaluation(
        self, states: list[AlertState], history: list[HistoryEvent], items: list[OutboxItem]
    ) -> int:
        """Write new ``states``, ``history`` lines and outbox ``items`` in one transaction.

        Returns:
            How many outbox items were queued (an item whose key is already queued is skipped).

        Raises:
            StoreError: the store failed; nothing was written.
        """
        with self._tx() as conn:
            existing = self._existing(conn, alert_states.c.fingerprint, [s.fingerprint for s in states])
            updates = [{**_state_row(s), "b_fp": s.fingerprint} for s in states if s.fingerprint in existing]
            inserts = [_state_row(s) for s in states if s.fingerprint not in existing]
            if updates:
                conn.execute(
                    alert_states.update().where(alert_states.c.fingerprint == sa.bindparam("b_fp")), updates
                )
            if inserts:
                conn.execute(alert_states.insert(), inserts)
            if history:
                conn.execute(alert_history.insert(), [e.__dict__ for e in history])
            queued_keys = self._existing(conn, outbox.c.key, [i.key for i in items])
            fresh = [
                {k: v for k, v in i.__dict__.items() if k != "id"} for i in items if i.key not in queued_keys
            ]
            if fresh:
                conn.execute(outbox.insert(), fresh)
        return len(fresh)

    @staticmethod
    def _existing(conn: Connection, column: sa.Column[Any], values: list[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(values), 500):
            found |= set(conn.execute(sa.select(column).where(column.in_(values[i : i + 500]))).scalars())
        return found

    def delete_states(self, fingerprints: list[str]) -> None:
        """Forget alerts (e.g. of a rule that was removed and is resolved)."""
        if fingerprints:
            with self._tx() as conn:
                conn.execute(alert_states.delete().where(alert_states.c.fingerprint.in_(fingerprints)))

    def history(self, rule: str | None = None, limit: int = 100) -> list[HistoryEvent]:
        """Return the newest ``limit`` history lines (of ``rule``), newest first."""
        q = sa.select(alert_history).order_by(alert_history.c.id.desc()).limit(limit)
        if rule is not None:
            q = q.where(alert_history.c.rule == rule)
        with self._read() as conn:
            return [
                HistoryEvent(**{k: v for k, v in r._mapping.items() if k != "id"}) for r in conn.execute(q)
            ]

    def add_history(self, events: list[HistoryEvent]) -> None:
        """Append history lines."""
        if events:
            with self._tx() as conn:
                conn.execute(alert_history.insert(), [e.__dict__ for e in events])

    # ---- outbox -----------------------------------------------------------------------------

    def due(self, now: float, limit: int = 200) -> list[OutboxItem]:
        """Return pending items, oldest first (including ones not yet due: the dispatcher keeps order)."""
        q = sa.select(outbox).where(outbox.c.status == "pending").order_by(outbox.c.id).limit(limit)
        with self._read() as conn:
            return [_outbox_of(r) for r in conn.execute(q)]

    def outbox(self, status: str | None = None, rule: str | None = None) -> list[OutboxItem]:
        """Return outbox items (with ``status``: pending, sent or failed), oldest first."""
        q = sa.select(outbox).order_by(outbox.c.id)
        if status is not None:
            q = q.where(outbox.c.status == status)
        if rule is not None:
            q = q.where(outbox.c.rule == rule)
        with self._read() as conn:
            return [_outbox_of(r) for r in conn.execute(q)]

    def mark_sent(self, item_id: int, at: float, attempts: int, event: HistoryEvent | None = None) -> None:
        """Record a delivered item (and its history line, in the same transaction)."""
        with self._tx() as conn:
            conn.execute(
                outbox.update()
                .where(outbox.c.id == item_id)
                .values(status="sent", sent_at=at, attempts=attempts, last_error=None)
            )
            if event is not None:
                conn.execute(alert_history.insert().values(event.__dict__))

    def mark_retry(self, item_id: int, attempts: int, next_attempt_at: float, error: str) -> None:
        """Record a failed try that will be retried at ``next_attempt_at``; ``error`` must hold no secret."""
        with self._tx() as conn:
            conn.execute(
                outbox.update()
                .where(outbox.c.id == item_id)
                .values(attempts=attempts, next_attempt_at=next_attempt_at, last_error=error)
            )

    def mark_failed(self, item_id: int, attempts: int, error: str, event: HistoryEvent | None = None) -> None:
        """Record an item given up on (a final error, or too old); ``error`` must hold no secret."""
        with self._tx() as conn:
            conn.execute(
                outbox.update()
                .where(outbox.c.id == item_id)
                .values(status="failed", attempts=attempts, last_error=error)
            )
            if event is not None:
                conn.execute(alert_history.insert().values(event.__dict__))

    def prune(self, before: float) -> int:
        """Delete history and finished outbox items older than ``before``; return how many rows went."""
        with self._tx() as conn:
            n = conn.execute(alert_history.delete().where(alert_history.c.at < before)).rowcount or 0
            n += (
                conn.execute(
                    outbox.delete().where(outbox.c.status != "pending").where(outbox.c.created_at < before)
                ).rowcount
                or 0
            )
            n += conn.execute(silences.delete().where(silences.c.ends_at < before)).rowcount or 0
        return n

    # ---- silences ---------------------------------------------------------------------------

    def put_silence(self, silence: Silence) -> None:
        """Create or replace a silence (by id)."""
        row = {
            "id": silence.id,
            "matchers": [str(m) for m in silence.matchers],
            "starts_at": silence.starts_at,
            "ends_at": silence.ends_at,
            "comment": silence.comment,
            "created_by": silence.created_by,
            "created_at": silence.created_at or time.time(),
            "source": silence.source,
        }
        with self._tx() as conn:
            conn.execute(silences.delete().where(silences.c.id == silence.id))
            conn.execute(silences.insert().values(row))

    def silences(self, at: float | None = None, *, include_expired: bool = False) -> list[Silence]:
        """Return silences, active at ``at`` only when given (and not ``include_expired``)."""
        q = sa.select(silences).order_by(silences.c.starts_at)
        with self._read() as conn:
            found = [_silence_of(r) for r in conn.execute(q)]
        if at is not None and not include_expired:
            found = [s for s in found if s.active(at)]
        return found

    def expire_silence(self, silence_id: str, at: float) -> bool:
        """End a silence now; return False when there is none with that id (or an id prefix of it)."""
        with self._tx() as conn:
            ids = [i for i in conn.execute(sa.select(silences.c.id)).scalars() if i.startswith(silence_id)]
            if len(ids) != 1:
                return False
            conn.execute(silences.update().where(silences.c.id == ids[0]).values(ends_at=at))
        return True

    def sync_config_silences(self, wanted: list[Silence]) -> None:
        """Make the silences that came from the config file exactly ``wanted`` (CLI ones are kept)."""
        with self._tx() as conn:
            conn.execute(silences.delete().where(silences.c.source == "config"))
            for s in wanted:
                conn.execute(
                    silences.insert().values(
                        id=s.id,
                        matchers=[str(m) for m in s.matchers],
                        starts_at=s.starts_at,
                        ends_at=s.ends_at,
                        comment=s.comment,
                        created_by=s.created_by,
                        created_at=s.created_at or time.time(),
                        source="config",
                    )
                )

    # ---- health samples ---------------------------------------------------------------------

    def health_sample(self, dagger: str) -> HealthSample | None:
        """Return the last stored sample of ``dagger``."""
        with self._read() as conn:
            row = conn.execute(sa.select(health_samples).where(health_samples.c.dagger == dagger)).first()
        return None if row is None else HealthSample(row.dagger, row.at, dict(row._mapping["values"]))

    def put_health_sample(self, sample: HealthSample) -> None:
        """Store ``sample`` as the last one of its dagger."""
        with self._tx() as conn:
            conn.execute(health_samples.delete().where(health_samples.c.dagger == sample.dagger))
            conn.execute(
                health_samples.insert().values(dagger=sample.dagger, at=sample.at, values=sample.values)
            )

    # ---- the engine lease -------------------------------------------------------------------

    def acquire_lease(self, holder: str, ttl: float, now: float, name: str = "engine") -> None:
        """Take (or renew) the engine lease for ``ttl`` seconds.

        A lease held by another holder is taken over when it expired, or when it was held by a
        process on this host that no longer runs (an engine that was killed).

        Raises:
            EngineBusyError: another live engine holds it (naming it and when the lease ends).
        """
        with self._tx() as conn:
            row = conn.execute(sa.select(leases).where(leases.c.name == name)).first()
            if row is None:
                conn.execute(leases.insert().values(name=name, holder=holder, expires_at=now + ttl))
                return
            if row.holder != holder and row.expires_at > now and _holder_alive(row.holder):
                raise EngineBusyError(
                    f"another alert engine ({row.holder.rsplit(':', 1)[0]}) holds the store {self.safe_url} "
                    f"for {row.expires_at - now:.0f}s more",
                    hint="stop it first; engines sharing a store must not run at the same time",
                )
            conn.execute(
                leases.update().where(leases.c.name == name).values(holder=holder, expires_at=now + ttl)
            )

    def release_lease(self, holder: str, name: str = "engine") -> None:
        """Give the lease up (only when ``holder`` holds it)."""
        with self._tx() as conn:
            conn.execute(leases.delete().where(leases.c.name == name).where(leases.c.holder == holder))


def new_holder() -> str:
    """Return a lease holder id for this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _holder_alive(holder: str) -> bool:
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another host: trust the lease's expiry
    pid = int(pid_text)
    return pid == os.getpid() or pid_alive(pid)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _reason(exc: BaseException) -> str:
    """Return a one-line reason without the SQL statement or parameters (which could hold data)."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
