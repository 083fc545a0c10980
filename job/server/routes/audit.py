"""``/audit``: who did what, when, in your teams."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.server.routes.deps import API, Plane

router = APIRouter(prefix=API, tags=["audit"])


@router.get("/audit")
def audit(plane: Plane, limit: int = 100, target: str | None = None) -> list[dict[str, Any]]:
    """The newest audit entries of your teams."""
    return [a.to_dict() for a in plane.audit(max(1, min(limit, 10_000)), target)]
