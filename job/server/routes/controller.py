"""``/controller/{cluster}``: a cluster's controller claims it, reads its assignments and reports its rounds."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.server.bodies import ClaimIn, FailoverRoundIn, ReleaseIn, ReportIn
from job.server.routes.deps import API, Agent

router = APIRouter(prefix=f"{API}/controller/{{cluster}}", tags=["controller"])


@router.get("/settings")
def ctl_settings(agent: Agent) -> dict[str, Any]:
    """The cluster's Spark, Kafka and InfluxDB addresses (its controller's credential only)."""
    return agent.settings()


@router.get("/assignments")
def assignments(agent: Agent) -> list[dict[str, Any]]:
    """The cluster's daggers to run, stop or hand over (its controller's credential only)."""
    return agent.assignments()


@router.get("/holder")
def holder(agent: Agent) -> dict[str, Any]:
    """The controller recorded for the cluster (its controller's credential only)."""
    host, pid = agent.holder()
    return {"host": host, "pid": pid}


@router.post("/claim")
def claim(body: ClaimIn, agent: Agent) -> dict[str, Any]:
    """Record the caller as the cluster's controller; 409 when another one is alive."""
    agent.claim(body.host, body.pid, body.stale_s, body.gone, body.metrics_url)
    return {"ok": True}


@router.post("/release")
def release(body: ReleaseIn, agent: Agent) -> dict[str, Any]:
    """Clear the caller's heartbeat when it is still the cluster's controller."""
    agent.release(body.host, body.pid)
    return {"ok": True}


@router.post("/failover")
def failover(body: FailoverRoundIn, agent: Agent) -> dict[str, Any]:
    """Take over the daggers of clusters that fail over to this one and whose controller has been silent,
    by the server's clock, for the server's ``failover_after_s`` (or the longer ``after_s``)."""
    return {"moved": agent.fail_over(body.after_s)}


@router.post("/report")
def report(body: ReportIn, agent: Agent) -> dict[str, Any]:
    """Write one round: the cluster's daggers' status, samples, hand-overs and health; the heartbeat is
    the server's time."""
    agent.report(
        {dagger_id: status.sent() for dagger_id, status in body.updates.items()},
        [sample.sent() for sample in body.samples],
        body.health,
        body.handed,
        body.host,
        body.pid,
        body.prune_before,
        body.metrics_url,
    )
    return {"ok": True}
