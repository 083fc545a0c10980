"""Moving a dagger to another cluster of its team (by hand, or by automatic failover) without ever
running it twice, and resuming it from the same checkpoint.

A move points the dagger at the new cluster and sets ``moving_from`` to the old one. Then:

* the old cluster's controller stops the dagger gracefully (SIGTERM, as for ``stop``: the query
  finishes its micro-batch and commits its checkpoint) and clears ``moving_from``;
* the new cluster's controller waits until ``moving_from`` is clear. Only when the old controller's
  heartbeat is stale (it is gone) does it take over by itself, and only once the old process is
  verifiably gone: on the same host it stops that process itself (SIGTERM, SIGKILL after the stop
  timeout); on another host it waits until the process's liveness file ``<checkpoint>/query.json``
  says the query terminated or has been quiet for ``handoff_quiet_s``;
* it then starts the dagger on the checkpoint folder recorded in the registry, so totals continue.
  That folder must be reachable from both clusters' gateways at the same path (shared storage, e.g.
  the controllers' ``--state-dir`` on one NFS/CephFS mount). When it is not, the dagger is NOT started
  (it would otherwise start over from ``start_from`` and count again): it is marked failed with an
  error saying so, and moving it back resumes it where it stopped.

Failover: a cluster may name a failover cluster of the same team. When its controller heartbeat has
been stale for ``failover_after_s``, the failover cluster's controller moves the stale cluster's
running daggers to itself (audited as ``controller:<cluster>``, action ``failover``) and they resume
as above. A controller stopped on purpose clears its heartbeat and triggers no failover.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from job.control.errors import ConflictError, ControlError
from job.control.models import AuditEntry, Cluster, Dagger
from job.query.liveness import QUERY_FILE, read_json

log = logging.getLogger("daggers.controller")


def controller_user(cluster: str) -> str:
    """Return the audit-log user of ``cluster``'s controller."""
    return f"controller:{cluster}"


def relocate(d: Dagger, target: Cluster, now: float) -> str:
    """Point live dagger ``d`` at ``target`` and mark it leaving its cluster; return the old cluster's name.

    Raises ControlError when ``target`` is of another team, ConflictError when the dagger is already on
    it or still leaving another cluster.
    """
    if target.team_id != d.team_id:
        raise ControlError(
            f"cluster {target.name} belongs to team {target.team.name}, not to {d.team.name}: "
            "a dagger moves only between its own team's clusters"
        )
    if target.id == d.cluster_id:
        raise ConflictError(f"dagger {d.team.name}/{d.name} already is on cluster {target.name}")
    if d.moving_from_id is not None:
        source = d.moving_from.name if d.moving_from is not None else f"cluster #{d.moving_from_id}"
        raise ConflictError(
            f"dagger {d.team.name}/{d.name} is still moving from {source} to {d.cluster.name}",
            hint="wait until the old cluster's controller has stopped it (dagger show: moving_from clears)",
        )
    old = d.cluster.name
    d.moving_from_id, d.cluster_id, d.updated_at = d.cluster_id, target.id, now
    return old


def fail_over(s: Session, target: Cluster, after_s: float, now: float) -> list[str]:
    """Move the running daggers of every cluster of ``target``'s team that names ``target`` as its
    failover and whose controller heartbeat is older than ``after_s`` to ``target``; audit each as
    done by ``target``'s controller. Return the refs moved."""
    moved: list[str] = []
    sources = s.scalars(
        select(Cluster).where(
            Cluster.failover_to_id == target.id, Cluster.id != target.id, Cluster.team_id == target.team_id
        )
    )
    for source in sources:
        beat = source.controller_heartbeat
        if beat is None or now - beat < after_s:
            continue  # alive, or stopped on purpose (a clean stop clears the heartbeat)
        daggers = s.scalars(
            select(Dagger).where(
                Dagger.cluster_id == source.id,
                Dagger.tombstone == 0,
                Dagger.desired_state == "running",
                Dagger.moving_from_id.is_(None),
            )
        )
        for d in daggers:
            relocate(d, target, now)
            ref = f"{d.team.name}/{d.name}"
            reason = f"the controller of {source.name} has been silent for {now - beat:.0f} s"
            s.add(
                AuditEntry(
                    user=controller_user(target.name),
                    action="failover",
                    team=d.team.name,
                    target=f"dagger {ref}",
                    allowed=True,
                    details={
                        "from": source.name,
                        "to": target.name,
                        "reason": reason,
                        "heartbeat_age_s": round(now - beat, 1),
                    },
                )
            )
            log.warning("%s: failing over from %s to %s (%s)", ref, source.name, target.name, reason)
            moved.append(ref)
    return moved


def liveness_quiet(checkpoint: str | None, quiet_s: float, now: float) -> bool:
    """Return True when the query of ``checkpoint`` ended, or its liveness file has not changed for
    ``quiet_s`` (or there is none: it never started, or the folder cannot be reached from here)."""
    if not checkpoint:
        return True
    path = Path(checkpoint) / QUERY_FILE
    data = read_json(path)
    if data is None:
        return True
    if data.get("state") == "terminated":
        return True
    try:
        changed = max(float(data.get("at") or 0.0), path.stat().st_mtime)
    except OSError:
        return True
    return now - changed >= quiet_s


def unreachable(folder: Path, cluster: str, host: str) -> str:
    """Return the error of a dagger whose recorded checkpoint folder cannot be reached here."""
    return (
        f"its checkpoint folder {folder} is not reachable from cluster {cluster} (host {host}); it was NOT "
        "started, so nothing is counted twice or lost. A moved dagger resumes only from storage both "
        "clusters mount at the same path (shared state dir): mount it there and deploy again, or move "
        "the dagger back (daggers dagger move REF --cluster OLD)"
    )
