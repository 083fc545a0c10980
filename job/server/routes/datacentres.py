"""``/datacentres``: the data centres clusters are in."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.server.bodies import DatacentreIn
from job.server.routes.deps import API, Plane

router = APIRouter(prefix=API, tags=["clusters"])


@router.get("/datacentres")
def datacentres(plane: Plane) -> list[dict[str, Any]]:
    """The data centres."""
    return plane.datacentres()


@router.post("/datacentres", status_code=201)
def add_datacentre(body: DatacentreIn, plane: Plane) -> dict[str, Any]:
    """Add a data centre (superusers)."""
    plane.add_datacentre(body.name, body.description)
    return {"datacentre": body.name}
