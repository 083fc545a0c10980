"""``/health``: whether the server is up (no credential needed)."""

from typing import Any

from fastapi import APIRouter

from job.server.routes.deps import API

router = APIRouter(prefix=API, tags=["server"])


@router.get("/health")
def health() -> dict[str, Any]:
    """Whether the server is up (no credential needed)."""
    return {"ok": True, "api": "v1"}
