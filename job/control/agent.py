"""What a cluster's controller may do through the server, and nothing more.

A controller token is scoped to one cluster: :class:`ClusterAgent` reads that cluster's assignments
(the daggers on it or leaving it, with their current spec), writes those daggers' status and its own
heartbeat. It cannot see another cluster's daggers, nor change anything else in the registry.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select

from job.control.errors import ControlError, NotFoundError
from job.control.models import Cluster, Dagger, DaggerStatus, DaggerVersion, now

#: The status fields a controller reports (as :mod:`job.control.controller` keeps them).
STATUS_FIELDS = ("actual_state", "running_version", "running_generation", "checkpoint", "host", "pid",
                 "pid_start_time", "started_at", "stop_requested_at", "restarts", "next_restart_at",
                 "last_exit_code", "last_error", "progress", "lag", "log_path")


class ClusterAgent:
    """The operations of cluster ``cluster``'s controller on ``registry``."""

    def __init__(self, registry: Any, cluster: str) -> None:
        self.registry = registry
        self.cluster = cluster

    def _cluster(self, s: Any) -> Cluster:
        c = s.scalar(select(Cluster).where(Cluster.name == self.cluster))
        if c is None:
            raise NotFoundError(f"no cluster {self.cluster!r}")
        return c

    def assignments(self) -> dict[str, Any]:
        """Return the cluster's settings and its daggers (live, or deleted and not yet stopped, or leaving it),
        each with its desired state, current version's spec text and checkpoint epoch, and last status."""
        with self.registry.session() as s:
            c = self._cluster(s)
            out = []
            query = (select(Dagger).outerjoin(DaggerStatus)
                     .where(or_(Dagger.cluster_id == c.id, Dagger.moving_from_id == c.id),
                            or_(Dagger.tombstone == 0, DaggerStatus.actual_state.is_(None),
                                DaggerStatus.actual_state != "deleted")).order_by(Dagger.id))
            for d in s.scalars(query):
                v = s.scalars(select(DaggerVersion).where(DaggerVersion.dagger_id == d.id,
                                                          DaggerVersion.version == d.current_version)).one()
                st = d.status
                out.append({"id": d.id, "name": d.name, "team": d.team.name, "desired": d.desired_state,
                            "deleted": d.tombstone != 0, "version": d.current_version,
                            "generation": d.restart_generation, "spec_text": v.spec_text,
                            "epoch": v.checkpoint_epoch, "leaving": d.cluster_id != c.id,
                            "arriving_from": d.moving_from.name if d.cluster_id == c.id and d.moving_from else None,
                            "status": {f: getattr(st, f) for f in STATUS_FIELDS} if st else
                            {"actual_state": "created", "restarts": 0}})
            return {"cluster": c.name, "spark_master": c.spark_master, "spark_ui_url": c.spark_ui_url,
                    "kafka_bootstrap": c.kafka_bootstrap, "influx_url": c.influx_url, "daggers": out}

    def report(self, dagger_id: int, status: dict[str, Any]) -> None:
        """Write the status of one of the cluster's daggers. Raises ControlError for a field that is not a
        status field, NotFoundError for a dagger that is neither on this cluster nor leaving it."""
        unknown = sorted(set(status) - set(STATUS_FIELDS))
        if unknown:
            raise ControlError(f"not status fields: {', '.join(unknown)}")
        with self.registry.session() as s:
            c = self._cluster(s)
            d = s.get(Dagger, dagger_id)
            if d is None or c.id not in (d.cluster_id, d.moving_from_id):
                raise NotFoundError(f"no dagger {dagger_id} on cluster {self.cluster}")
            st = d.status or DaggerStatus(dagger_id=d.id)
            for key, value in status.items():
                setattr(st, key, value)
            st.updated_at = now()
            s.add(st)

    def heartbeat(self, host: str, pid: int, health: dict[str, Any] | None = None) -> float:
        """Record the controller's heartbeat (and the health it measured); return the time recorded."""
        at = now()
        with self.registry.session() as s:
            c = self._cluster(s)
            c.controller_host, c.controller_pid, c.controller_heartbeat = host[:255], pid, at
            if health is not None:
                c.health, c.health_at = health, at
        return at
