"""``/clusters``: where daggers run, their failover and their health."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.control.access import check_name
from job.server.bodies import ClusterIn, FailoverIn
from job.server.routes.deps import API, Plane

router = APIRouter(prefix=API, tags=["clusters"])


@router.get("/clusters")
def clusters(plane: Plane) -> list[dict[str, Any]]:
    """Your teams' clusters."""
    return [c.to_dict() for c in plane.clusters()]


@router.post("/clusters", status_code=201)
def add_cluster(body: ClusterIn, plane: Plane) -> dict[str, Any]:
    """Add a cluster to a team (superusers and the team's admins)."""
    return plane.add_cluster(
        body.name,
        team=body.team,
        datacentre=body.datacentre,
        spark_master=body.spark_master,
        kafka_bootstrap=body.kafka_bootstrap,
        influx_url=body.influx_url,
        spark_ui_url=body.spark_ui_url,
        description=body.description,
        failover_to=body.failover_to,
    ).to_dict()


@router.get("/clusters/{cluster}")
def cluster(cluster: str, plane: Plane) -> dict[str, Any]:
    """One cluster."""
    return plane.cluster(check_name("cluster", cluster)).to_dict()


@router.put("/clusters/{cluster}/failover")
def set_failover(cluster: str, body: FailoverIn, plane: Plane) -> dict[str, Any]:
    """Set the cluster that takes over this one's daggers (the team's admins)."""
    return plane.set_failover(check_name("cluster", cluster), body.failover_to).to_dict()


@router.get("/clusters/{cluster}/health")
def cluster_health(cluster: str, plane: Plane, live: bool = False) -> dict[str, Any]:
    """The cluster's health: recorded by its controller, or probed now with ``live``."""
    return plane.cluster_health(check_name("cluster", cluster), live=live)


@router.get("/clusters/{cluster}/topics")
def cluster_topics(cluster: str, plane: Plane) -> list[str]:
    """The topics on the cluster's brokers."""
    return plane.cluster_topics(check_name("cluster", cluster))
