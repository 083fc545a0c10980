"""What the control plane returns: plain, JSON-ready snapshots of registry rows (no live ORM objects)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from job.control.health_model import (
    ClusterHealth,
    DaggerFacts,
    HealthSettings,
    Point,
    cluster_health,
    dagger_health,
)
from job.control.models import AuditEntry, Cluster, Dagger, DaggerVersion, Sample, now


def _dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


@dataclass(frozen=True)
class ClusterView:
    """A cluster, its controller's heartbeat and the last health it recorded."""

    name: str
    team: str
    datacentre: str
    spark_master: str
    spark_ui_url: str | None
    kafka_bootstrap: str
    influx_url: str
    description: str
    controller_host: str | None
    controller_pid: int | None
    controller_heartbeat: float | None
    health: dict[str, Any] | None
    health_at: float | None
    daggers_total: int = 0
    daggers_running: int = 0
    failover_to: str | None = None  # the cluster that takes over its daggers when its controller is gone
    controller_metrics_url: str | None = None
    #: The health model's verdict (job.control.health_model.ClusterHealth as a dict): state, reasons, parts.
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls, c: Cluster, total: int = 0, running: int = 0, verdict: ClusterHealth | None = None
    ) -> ClusterView:
        """Return the view of row ``c`` with its dagger counts and the health model's verdict."""
        return cls(
            name=c.name,
            team=c.team.name,
            datacentre=c.datacentre.name,
            spark_master=c.spark_master,
            spark_ui_url=c.spark_ui_url,
            kafka_bootstrap=c.kafka_bootstrap,
            influx_url=c.influx_url,
            description=c.description,
            controller_host=c.controller_host,
            controller_pid=c.controller_pid,
            controller_heartbeat=c.controller_heartbeat,
            health=c.health,
            health_at=c.health_at,
            daggers_total=total,
            daggers_running=running,
            failover_to=c.failover_to.name if c.failover_to is not None else None,
            controller_metrics_url=c.controller_metrics_url,
            state=verdict.to_dict() if verdict is not None else {},
        )

    def controller_alive(self, now: float, within_s: float = 30.0) -> bool:
        """Return True when the controller's last heartbeat is less than ``within_s`` seconds old."""
        return self.controller_heartbeat is not None and now - self.controller_heartbeat < within_s

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


_FACT_FIELDS = (
    "actual_state",
    "restarts",
    "started_at",
    "running_version",
    "next_restart_at",
    "last_error",
    "progress",
    "lag",
    "lag_at",
    "lag_error",
    "lag_error_at",
    "lag_unknown",
)


def recent_points(s: Session, dagger_ids: list[int], since: float) -> dict[int, list[Point]]:
    """Return the progress samples taken since ``since`` of each dagger in ``dagger_ids``, oldest first."""
    out: dict[int, list[Point]] = {i: [] for i in dagger_ids}
    if not dagger_ids:
        return out
    rows = s.execute(
        select(Sample.dagger_id, Sample.at, Sample.input_rows, Sample.lag)
        .where(Sample.dagger_id.in_(dagger_ids), Sample.at >= since)
        .order_by(Sample.at)
    )
    for dagger_id, at, rows_, lag in rows:
        out[dagger_id].append(Point(at=at, input_rows=rows_, lag=lag))
    return out


def judged(
    s: Session, daggers: list[Dagger], settings: HealthSettings, at: float | None = None
) -> list[DaggerView]:
    """Return the views of ``daggers``, each judged by the health model from its samples of the last
    stall and lag windows."""
    at = now() if at is None else at
    since = at - max(settings.stall_after_s, settings.lag_window_max_s, settings.rate_window_s) - 60.0
    points = recent_points(s, [d.id for d in daggers], since)
    return [DaggerView.of(d, points[d.id], at=at, settings=settings) for d in daggers]


def cluster_verdict(
    c: Cluster, dagger_states: list[str], settings: HealthSettings, at: float
) -> ClusterHealth:
    """Return the health model's verdict on cluster row ``c`` given its daggers' states."""
    return cluster_health(c.controller_heartbeat, c.health, c.health_at, dagger_states, at, settings)


@dataclass(frozen=True)
class DaggerView:
    """A dagger with its desired state and what its controller saw last."""

    id: int
    name: str
    team: str
    cluster: str
    datacentre: str
    current_version: int
    desired_state: str
    actual_state: str
    running_version: int | None
    restarts: int
    last_error: str | None
    last_exit_code: int | None
    progress: dict[str, Any]
    lag: int | None
    pid: int | None
    host: str | None
    checkpoint: str | None
    started_at: float | None
    status_updated_at: float | None
    created_by: str
    created_at: float
    updated_at: float
    moving_from: str | None = None  # the cluster it is leaving: set until that cluster has stopped it
    lag_at: float | None = None
    #: The health model's verdict (job.control.health_model.DaggerHealth as a dict): state, reason, figures.
    health: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The health model's state: running, starting, catching up, lagging, stalled, crash-looping, failed,
        stopped or unknown."""
        return str(self.health.get("state") or "unknown")

    @property
    def ref(self) -> str:
        """``team/name``: how commands name this dagger unambiguously."""
        return f"{self.team}/{self.name}"

    @classmethod
    def of(
        cls,
        d: Dagger,
        samples: list[Point] | None = None,
        *,
        at: float | None = None,
        settings: HealthSettings | None = None,
    ) -> DaggerView:
        """Return the view of row ``d`` (its status row may be missing: never deployed), judged by the health
        model at ``at`` (now) from its recent ``samples``."""
        st = d.status
        facts = DaggerFacts.of(
            d.desired_state,
            {k: getattr(st, k) for k in _FACT_FIELDS} if st else None,
            heartbeat=d.cluster.controller_heartbeat,
            samples=samples or [],
        )
        verdict = dagger_health(facts, now() if at is None else at, settings)
        return cls(
            id=d.id,
            name=d.name,
            team=d.team.name,
            cluster=d.cluster.name,
            datacentre=d.cluster.datacentre.name,
            current_version=d.current_version,
            desired_state=d.desired_state,
            actual_state=st.actual_state if st else "created",
            running_version=st.running_version if st else None,
            restarts=st.restarts if st else 0,
            last_error=st.last_error if st else None,
            last_exit_code=st.last_exit_code if st else None,
            progress=dict(st.progress or {}) if st else {},
            lag=st.lag if st else None,
            pid=st.pid if st else None,
            host=st.host if st else None,
            checkpoint=st.checkpoint if st else None,
            started_at=st.started_at if st else None,
            status_updated_at=st.updated_at if st else None,
            created_by=d.created_by,
            created_at=d.created_at,
            updated_at=d.updated_at,
            moving_from=d.moving_from.name if d.moving_from is not None else None,
            lag_at=st.lag_at if st else None,
            health=verdict.to_dict(),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (with ``ref``)."""
        return {"ref": self.ref, **_dict(self)}


@dataclass(frozen=True)
class VersionView:
    """One spec version."""

    version: int
    spec_text: str
    checkpoint_epoch: int
    comment: str
    created_by: str
    created_at: float

    @classmethod
    def of(cls, v: DaggerVersion) -> VersionView:
        """Return the view of row ``v``."""
        return cls(
            version=v.version,
            spec_text=v.spec_text,
            checkpoint_epoch=v.checkpoint_epoch,
            comment=v.comment,
            created_by=v.created_by,
            created_at=v.created_at,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class SampleView:
    """One progress sample of a dagger."""

    at: float
    input_rows: int
    input_rows_per_s: float
    processed_rows_per_s: float
    batch_duration_ms: int
    lag: int | None

    @classmethod
    def of(cls, s: Sample) -> SampleView:
        """Return the view of row ``s``."""
        return cls(
            at=s.at,
            input_rows=s.input_rows,
            input_rows_per_s=s.input_rows_per_s,
            processed_rows_per_s=s.processed_rows_per_s,
            batch_duration_ms=s.batch_duration_ms,
            lag=s.lag,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class AuditView:
    """One audit entry: who did what, when, and whether it was allowed."""

    at: float
    user: str
    action: str
    team: str | None
    target: str
    allowed: bool
    details: dict[str, Any]
    credential: str | None = None  # token:<id>, oidc:<subject>, controller:<id>; None in embedded mode
    source: str | None = None  # the client's address, as the server saw it

    @classmethod
    def of(cls, a: AuditEntry) -> AuditView:
        """Return the view of row ``a``."""
        return cls(
            at=a.at,
            user=a.user,
            action=a.action,
            team=a.team,
            target=a.target,
            allowed=a.allowed,
            details=dict(a.details or {}),
            credential=a.credential,
            source=a.source,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class Compatibility:
    """Whether a new spec version can resume from the running version's checkpoint.

    ``resume`` False means the new version starts a fresh checkpoint (its ``start_from`` applies and
    window state and counters start empty); ``reasons`` say why. ``notes`` are what changes anyway.
    """

    resume: bool
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Return one sentence for a person."""
        if self.resume:
            return "resumes from the checkpoint" + (f" ({'; '.join(self.notes)})" if self.notes else "")
        return "cannot resume from the checkpoint: " + "; ".join(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class EditResult:
    """The outcome of an edit (or rollback or publish): the new version and what happens to the checkpoint."""

    ref: str
    version: int
    checkpoint_epoch: int
    compatibility: Compatibility
    redeploys: bool  # the dagger runs, so the controller rolls the new version out now

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class Validation:
    """The result of checking a spec text: ``ok``, or the error with its line and column (in the SQL)."""

    ok: bool
    title: str = ""
    message: str = ""
    line: int | None = None
    col: int | None = None
    hint: str | None = None
    columns: dict[str, list[str]] = field(default_factory=dict)
    window: list[str | None] | None = None
    #: What only the dagger's host can check (its schema, functions, variables), each with the reason.
    deferred: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return _dict(self)


@dataclass(frozen=True)
class DaggerScreenView:
    """Everything the console's dagger screen shows, read at once."""

    dagger: DaggerView
    samples: list[SampleView]
    versions: list[VersionView]
    audit: list[AuditView]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "dagger": self.dagger.to_dict(),
            "samples": [x.to_dict() for x in self.samples],
            "versions": [x.to_dict() for x in self.versions],
            "audit": [x.to_dict() for x in self.audit],
        }
