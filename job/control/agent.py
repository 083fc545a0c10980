"""What a cluster's controller reads and writes in the registry, and nothing more.

:class:`ClusterAgent` is the controller's whole view of the registry, scoped to one cluster: the cluster's
settings, its assignments (the daggers on it or leaving it, with their current spec), the status of those
daggers, their progress samples, the hand-over of moved daggers, the failover of clusters that name this
one, and its own claim and heartbeat. :class:`job.control.controller.Controller` uses it directly on a
registry (embedded) or through the server with a controller token
(:class:`job.control.remote.RemoteClusterAgent`, the same methods), so a controller needs no database
credentials.

Time is the agent's own (``clock``, the server's when it runs in the server): a controller reports what it
saw, but the heartbeat, the status's ``updated_at`` and the failover decision use the agent's clock, and a
failover waits at least ``min_failover_after_s`` however short a wait the controller asks for.

A controller and a server of different ages interoperate: a report's status or sample field this version does
not know (a newer controller's) is dropped, not refused, and a field an older controller does not send is left
as it is (a report changes only the fields it names).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from job.control import handoff
from job.control.errors import ConflictError, ControlError, NotFoundError
from job.control.models import Cluster, Dagger, DaggerStatus, DaggerVersion, Sample
from job.control.registry import Registry

log = logging.getLogger(__name__)
#: The fields of a newer controller this version dropped (each is logged once).
_DROPPED: set[str] = set()

#: The status fields a controller reports.
STATUS_FIELDS = (
    "actual_state",
    "running_version",
    "running_generation",
    "checkpoint",
    "host",
    "pid",
    "pid_start_time",
    "started_at",
    "stop_requested_at",
    "restarts",
    "next_restart_at",
    "last_exit_code",
    "last_error",
    "progress",
    "lag",
    "lag_at",
    "lag_error",
    "lag_error_at",
    "lag_unknown",
    "log_path",
)
#: The fields of a progress sample.
SAMPLE_FIELDS = (
    "dagger_id",
    "at",
    "input_rows",
    "input_rows_per_s",
    "processed_rows_per_s",
    "batch_duration_ms",
    "lag",
)


def known_fields(values: dict[str, Any], known: tuple[str, ...], what: str) -> dict[str, Any]:
    """Return ``values`` without the fields not in ``known`` (a newer controller's ``what`` fields), logging
    each such field once."""
    if not (unknown := set(values) - set(known)):
        return values
    if new := sorted(unknown - _DROPPED):
        _DROPPED.update(new)
        log.warning(
            "a controller reports %s fields this version does not know (a newer controller?); dropped: %s",
            what,
            ", ".join(new),
        )
    return {k: v for k, v in values.items() if k in known}


class ClusterAgent:
    """The registry operations of cluster ``cluster``'s controller (see the module docstring)."""

    def __init__(
        self,
        registry: Registry,
        cluster: str,
        *,
        min_failover_after_s: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self.cluster = cluster
        self.where = registry.safe_url
        self.min_failover_after_s = min_failover_after_s
        self.clock = clock

    def _cluster(self, s: Session) -> Cluster:
        c = s.scalar(select(Cluster).where(Cluster.name == self.cluster))
        if c is None:
            raise NotFoundError(f"no cluster {self.cluster!r} in the registry {self.registry.safe_url}")
        return c

    def settings(self) -> dict[str, Any]:
        """Return the cluster's Spark master and UI, Kafka bootstrap and InfluxDB URL. Raises NotFoundError."""
        with self.registry.session() as s:
            c = self._cluster(s)
            return {
                "cluster": c.name,
                "spark_master": c.spark_master,
                "spark_ui_url": c.spark_ui_url,
                "kafka_bootstrap": c.kafka_bootstrap,
                "influx_url": c.influx_url,
            }

    def claim(self, host: str, pid: int, stale_s: float, gone: bool, metrics_url: str | None = None) -> None:
        """Record (host, pid) as the cluster's controller, serving Prometheus metrics at ``metrics_url``. Raises
        ConflictError when another controller's heartbeat is younger than ``stale_s`` (unless ``gone``: the caller
        found that process dead on its host)."""
        with self.registry.session() as s:
            c = self._cluster(s)
            at = self.clock()
            fresh = c.controller_heartbeat is not None and at - c.controller_heartbeat < stale_s
            other = (c.controller_host, c.controller_pid) != (host, pid)
            if fresh and other and not (gone and c.controller_host == host):
                raise ConflictError(
                    f"cluster {self.cluster} already has a controller "
                    f"({c.controller_host}, pid {c.controller_pid})",
                    hint=f"stop it first; a heartbeat older than {stale_s:g} s is taken over",
                )
            c.controller_host, c.controller_pid, c.controller_heartbeat = host[:255], pid, at
            c.controller_metrics_url = metrics_url

    def holder(self) -> tuple[str | None, int | None]:
        """Return the (host, pid) recorded as the cluster's controller."""
        with self.registry.session() as s:
            c = self._cluster(s)
            return c.controller_host, c.controller_pid

    def release(self, host: str, pid: int) -> None:
        """Clear the heartbeat when (host, pid) is still the recorded controller."""
        with self.registry.session() as s:
            c = self._cluster(s)
            if (c.controller_host, c.controller_pid) == (host, pid):
                c.controller_heartbeat = None
                c.controller_metrics_url = None

    def fail_over(self, after_s: float | None = None) -> list[str]:
        """Take over the running daggers of the clusters that fail over to this one and whose controller has
        been silent, by the agent's clock, for ``after_s`` (at least ``min_failover_after_s``); return the refs
        moved (see :func:`job.control.handoff.fail_over`). Raises ControlError when neither gives a wait."""
        wait = max(after_s or 0.0, self.min_failover_after_s)
        if not math.isfinite(wait) or wait <= 0:
            raise ControlError(f"after_s: {after_s!r} is not a positive number of seconds")
        with self.registry.session() as s:
            return handoff.fail_over(s, self._cluster(s), wait, self.clock())

    def assignments(self) -> list[dict[str, Any]]:
        """Return the cluster's daggers (live, or deleted and not yet stopped, or leaving it), each with its
        desired state, current version's spec text and checkpoint epoch, restart generation, last status,
        and where it is moving from or whether it is leaving."""
        with self.registry.session() as s:
            c = self._cluster(s)
            out = []
            query = (
                select(Dagger)
                .outerjoin(DaggerStatus)
                .where(
                    or_(Dagger.cluster_id == c.id, Dagger.moving_from_id == c.id),
                    or_(
                        Dagger.tombstone == 0,
                        DaggerStatus.actual_state.is_(None),
                        DaggerStatus.actual_state != "deleted",
                    ),
                )
                .order_by(Dagger.id)
            )
            for d in s.scalars(query):
                v = s.scalars(
                    select(DaggerVersion).where(
                        DaggerVersion.dagger_id == d.id, DaggerVersion.version == d.current_version
                    )
                ).one()
                st = d.status
                leaving = d.cluster_id != c.id
                arriving = d.moving_from if not leaving and d.moving_from is not None else None
                out.append(
                    {
                        "id": d.id,
                        "name": d.name,
                        "team": d.team.name,
                        "desired": d.desired_state,
                        "deleted": d.tombstone != 0,
                        "version": d.current_version,
                        "generation": d.restart_generation,
                        "spec_text": v.spec_text,
                        "epoch": v.checkpoint_epoch,
                        "leaving": leaving,
                        "arriving_from": arriving.name if arriving else None,
                        "from_heartbeat": arriving.controller_heartbeat if arriving else None,
                        "status": {f: getattr(st, f) for f in STATUS_FIELDS}
                        if st
                        else {"actual_state": "created", "restarts": 0},
                    }
                )
            return out

    def report(
        self,
        updates: dict[int, dict[str, Any]],
        samples: list[dict[str, Any]],
        health: dict[str, Any] | None,
        handed: list[int],
        host: str,
        pid: int,
        prune_before: float | None = None,
        metrics_url: str | None = None,
    ) -> None:
        """Write one round in one transaction: the daggers' status changes, progress samples, hand-overs
        done, the controller's heartbeat (and health, and where it serves its metrics), all at the agent's
        clock's time, and drop samples older than ``prune_before`` (at most that time).

        A status or sample field this version does not know (a newer controller's) is dropped. Raises
        NotFoundError for a dagger that is neither on this cluster nor leaving it.
        """
        updates = {k: known_fields(upd, STATUS_FIELDS, "status") for k, upd in updates.items()}
        samples = [known_fields(sample, SAMPLE_FIELDS, "sample") for sample in samples]
        now = self.clock()
        with self.registry.session() as s:
            c = self._cluster(s)
            ids = (
                {int(i) for i in updates} | {int(x["dagger_id"]) for x in samples} | {int(i) for i in handed}
            )
            mine = (
                set(
                    s.scalars(
                        select(Dagger.id).where(
                            Dagger.id.in_(ids), or_(Dagger.cluster_id == c.id, Dagger.moving_from_id == c.id)
                        )
                    )
                )
                if ids
                else set()
            )
            if ids - mine:
                raise NotFoundError(f"no dagger {min(ids - mine)} on cluster {self.cluster}")
            for dagger_id, upd in updates.items():
                st = s.get(DaggerStatus, int(dagger_id))
                if st is None:
                    st = DaggerStatus(dagger_id=int(dagger_id))
                    s.add(st)
                for key, value in upd.items():
                    setattr(st, key, value)
                st.updated_at = now
            s.add_all(Sample(**x) for x in samples)
            if handed:  # moves whose hand-off is done: leaving daggers stopped here, arriving ones taken over
                s.execute(
                    update(Dagger)
                    .where(
                        Dagger.id.in_(handed),
                        Dagger.moving_from_id.is_not(None),
                        or_(Dagger.moving_from_id == c.id, Dagger.cluster_id == c.id),
                    )
                    .values(moving_from_id=None)
                )
            c.controller_host, c.controller_pid, c.controller_heartbeat = host[:255], pid, now
            c.controller_metrics_url = metrics_url
            if health is not None:
                c.health, c.health_at = health, now
            if prune_before is not None:
                mine_now = select(Dagger.id).where(Dagger.cluster_id == c.id)
                s.execute(
                    delete(Sample).where(Sample.at < min(prune_before, now), Sample.dagger_id.in_(mine_now))
                )
