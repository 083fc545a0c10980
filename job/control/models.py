"""The registry's tables (SQLAlchemy 2 ORM), the same on SQLite and PostgreSQL.

Times are UNIX epoch seconds (floats), so both databases store and compare them the same way.
A deleted dagger keeps its versions and audit trail: its ``tombstone`` becomes its own id, which
frees its name for a new dagger of the team (names are unique per team among live daggers).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

ROLES = ("viewer", "editor", "admin")
DESIRED_STATES = ("stopped", "running", "deleted")
#: What the controller reports. ``created``: never deployed; ``pending``: asked to run, no controller
#: has picked it up yet; ``crashed``: exited, a restart is scheduled; ``failed``: gave up restarting.
ACTUAL_STATES = (
    "created",
    "pending",
    "starting",
    "running",
    "stopping",
    "stopped",
    "crashed",
    "failed",
    "deleted",
)


def now() -> float:
    """Return the current time as epoch seconds."""
    return time.time()


class Base(DeclarativeBase):
    """Declarative base of the registry tables."""

    type_annotation_map = {dict[str, Any]: JSON}


class DataCentre(Base):
    """A data centre: clusters are grouped by it."""

    __tablename__ = "datacentres"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Team(Base):
    """A team owns clusters and daggers; users act on them through a membership."""

    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class User(Base):
    """A person (or a script). ``is_superuser`` may manage teams, users and data centres."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    is_superuser: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Membership(Base):
    """A user's role in a team: viewer, editor or admin."""

    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("user_id", "team_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    role: Mapped[str] = mapped_column(String(16))
    team: Mapped[Team] = relationship()
    user: Mapped[User] = relationship()


class Cluster(Base):
    """Where daggers run: a Spark master, Kafka bootstrap servers and an InfluxDB, in a data centre.

    The controller of the cluster writes its heartbeat and the last health it measured here.
    """

    __tablename__ = "clusters"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    datacentre_id: Mapped[int] = mapped_column(ForeignKey("datacentres.id"))
    spark_master: Mapped[str] = mapped_column(String(255))
    spark_ui_url: Mapped[str | None] = mapped_column(String(255), nullable=True)
    kafka_bootstrap: Mapped[str] = mapped_column(String(1024))
    influx_url: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=now)
    controller_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    controller_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    controller_heartbeat: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Where the controller serves its Prometheus metrics (``http://host:port/metrics``), None when it does not.
    controller_metrics_url: Mapped[str | None] = mapped_column(String(255), nullable=True)
    health: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    health_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The cluster (of the same team) whose controller takes over this one's running daggers when this
    #: one's controller heartbeat has been stale for its ``failover_after_s`` (see job.control.handoff).
    failover_to_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    team: Mapped[Team] = relationship()
    datacentre: Mapped[DataCentre] = relationship()
    failover_to: Mapped[Cluster | None] = relationship(
        primaryjoin="Cluster.failover_to_id == Cluster.id",
        foreign_keys="Cluster.failover_to_id",
        remote_side="Cluster.id",
        viewonly=True,
    )


class Dagger(Base):
    """A dagger and its desired state. ``current_version`` is the spec version to run."""

    __tablename__ = "daggers"
    __table_args__ = (UniqueConstraint("team_id", "name", "tombstone"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id"))
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    desired_state: Mapped[str] = mapped_column(String(16), default="stopped")
    #: Bumped by "restart": the controller restarts a running dagger whose generation it has not run.
    restart_generation: Mapped[int] = mapped_column(Integer, default=0)
    tombstone: Mapped[int] = mapped_column(Integer, default=0)
    #: Set by a move: the cluster the dagger is leaving. Its controller stops the dagger and clears it;
    #: the new cluster's controller starts the dagger only then (or once the old controller is gone and
    #: the old process verifiably stopped), so the two never run it at once.
    moving_from_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_by: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now)
    team: Mapped[Team] = relationship()
    cluster: Mapped[Cluster] = relationship(foreign_keys=[cluster_id])
    moving_from: Mapped[Cluster | None] = relationship(
        primaryjoin="Dagger.moving_from_id == Cluster.id", foreign_keys=[moving_from_id], viewonly=True
    )
    versions: Mapped[list[DaggerVersion]] = relationship(
        back_populates="dagger", order_by="DaggerVersion.version", cascade="all, delete-orphan"
    )
    status: Mapped[DaggerStatus | None] = relationship(
        back_populates="dagger", cascade="all, delete-orphan", uselist=False
    )


class DaggerVersion(Base):
    """One version of a dagger's spec, as the YAML text the user gave (``${VAR}`` left unresolved).

    ``checkpoint_epoch`` numbers the checkpoint the version runs on: an edit that Spark can resume
    keeps it, an edit it cannot (a new aggregation, another proto class) starts a new one.
    """

    __tablename__ = "dagger_versions"
    __table_args__ = (UniqueConstraint("dagger_id", "version"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    dagger_id: Mapped[int] = mapped_column(ForeignKey("daggers.id"))
    version: Mapped[int] = mapped_column(Integer)
    spec_text: Mapped[str] = mapped_column(Text)
    checkpoint_epoch: Mapped[int] = mapped_column(Integer, default=1)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[float] = mapped_column(Float, default=now)
    dagger: Mapped[Dagger] = relationship(back_populates="versions")


class DaggerStatus(Base):
    """What the controller saw last: the state, the process, the progress and the last error."""

    __tablename__ = "dagger_status"
    dagger_id: Mapped[int] = mapped_column(ForeignKey("daggers.id"), primary_key=True)
    actual_state: Mapped[str] = mapped_column(String(16), default="created")
    running_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    running_generation: Mapped[int | None] = mapped_column(Integer, nullable=True)
    checkpoint: Mapped[str | None] = mapped_column(Text, nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pid_start_time: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    stop_requested_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    next_restart_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    lag: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lag_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # when ``lag`` was read
    #: Why the last lag read failed (the brokers' end offsets could not be read); None when it worked.
    lag_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: When the first of the failed lag reads in a row was asked for; None when the last one worked.
    lag_error_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: Why no lag can be told though the brokers answered (an end offset below the dagger's position).
    lag_unknown: Mapped[str | None] = mapped_column(Text, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[float] = mapped_column(Float, default=now)
    dagger: Mapped[Dagger] = relationship(back_populates="status")


class Sample(Base):
    """One progress sample of a running dagger (for the console's sparklines)."""

    __tablename__ = "dagger_samples"
    id: Mapped[int] = mapped_column(primary_key=True)
    dagger_id: Mapped[int] = mapped_column(ForeignKey("daggers.id"), index=True)
    at: Mapped[float] = mapped_column(Float)
    input_rows: Mapped[int] = mapped_column(BigInteger, default=0)
    input_rows_per_s: Mapped[float] = mapped_column(Float, default=0.0)
    processed_rows_per_s: Mapped[float] = mapped_column(Float, default=0.0)
    batch_duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    lag: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class AuditEntry(Base):
    """Who did what, when: every change, and every refused attempt (``allowed`` False)."""

    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[float] = mapped_column(Float, default=now, index=True)
    user: Mapped[str] = mapped_column(String(63))
    action: Mapped[str] = mapped_column(String(63))
    team: Mapped[str | None] = mapped_column(String(63), nullable=True)
    target: Mapped[str] = mapped_column(String(255), default="")
    allowed: Mapped[bool] = mapped_column(Boolean, default=True)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: The credential the user signed in with through the server: ``token:<id>``, ``oidc:<subject>`` or
    #: ``controller:<id>``; in embedded mode ``embedded:<OS user>``.
    credential: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: The client's address as the server saw it; in embedded mode ``local <host> pid <pid>``.
    source: Mapped[str | None] = mapped_column(String(255), nullable=True)


class ApiToken(Base):
    """A credential for the server: a personal API token, an OIDC session, or a cluster's controller token.

    Only ``secret_hash`` (SHA-256 of the token's 256-bit random secret) is kept, never the token. ``token_id``
    is public (it is part of the token and names it in lists and the audit log). ``kind`` is ``user``
    (a personal token), ``oidc`` (issued for a verified OIDC sign-in; ``subject`` says whose) or
    ``controller`` (acts only on ``cluster_id``'s assignments, state and heartbeat).
    """

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    token_id: Mapped[str] = mapped_column(String(32), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16), default="user")
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    cluster_id: Mapped[int | None] = mapped_column(ForeignKey("clusters.id"), nullable=True)
    subject: Mapped[str | None] = mapped_column(String(255), nullable=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[float] = mapped_column(Float, default=now)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    user: Mapped[User | None] = relationship()
    cluster: Mapped[Cluster | None] = relationship()


class OidcIdentity(Base):
    """Maps an OpenID Connect identity (issuer, subject) to a Daggers user."""

    __tablename__ = "oidc_identities"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    subject: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[float] = mapped_column(Float, default=now)
    user: Mapped[User] = relationship()
