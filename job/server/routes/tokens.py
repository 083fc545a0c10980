"""``/tokens``: personal and controller tokens (never their secrets, but once when made)."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.control.errors import NotFoundError
from job.server.bodies import ExpireIn, TokenIn
from job.server.routes.deps import API, Plane

router = APIRouter(prefix=API, tags=["tokens"])


@router.get("/tokens")
def tokens(plane: Plane, user: str | None = None) -> list[dict[str, Any]]:
    """Every token (superusers), never their secrets."""
    return [t.to_dict() for t in plane.tokens(user)]


@router.post("/tokens", status_code=201)
def create_token(body: TokenIn, plane: Plane) -> dict[str, Any]:
    """Make a personal token (superusers) or a cluster's controller token (its team's admins); the token
    is in this answer only."""
    view, token = plane.create_token(
        body.user, cluster=body.cluster, description=body.description, expires_in_s=body.expires_in_s
    )
    return {**view.to_dict(), "token": token}


@router.post("/tokens/{token_id}/revoke")
def revoke_token(token_id: str, plane: Plane) -> dict[str, Any]:
    """Revoke a token now."""
    return plane.revoke_token(_token_id(token_id)).to_dict()


@router.post("/tokens/{token_id}/expire")
def expire_token(token_id: str, body: ExpireIn, plane: Plane) -> dict[str, Any]:
    """Set when a token expires (default: now)."""
    return plane.expire_token(_token_id(token_id), body.at).to_dict()


def _token_id(token_id: str) -> str:
    if len(token_id) != 12 or any(ch not in "0123456789abcdef" for ch in token_id):
        raise NotFoundError(f"no token {token_id[:40]!r}")
    return token_id
