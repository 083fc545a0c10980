"""``/whoami`` and ``/users``: the signed-in user, the users, and their OIDC subjects."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.control.errors import NotFoundError
from job.server.bodies import OidcLinkIn, UserIn
from job.server.routes.deps import API, Plane, State

router = APIRouter(prefix=API, tags=["users"])


@router.get("/whoami")
def whoami(plane: Plane) -> dict[str, Any]:
    """The signed-in user, superuser flag and roles."""
    return {**plane.whoami(), "credential": plane.credential}


@router.get("/users")
def users(plane: Plane) -> list[dict[str, Any]]:
    """The users you can see."""
    return plane.users()


@router.post("/users", status_code=201)
def add_user(body: UserIn, plane: Plane) -> dict[str, Any]:
    """Add a user (superusers)."""
    plane.add_user(body.name, superuser=body.superuser)
    return {"user": body.name}


@router.put("/users/{user}/oidc")
def link_oidc(user: str, body: OidcLinkIn, plane: Plane, state: State) -> dict[str, Any]:
    """Map an OIDC subject of the server's provider to a user (superusers)."""
    if state.settings.oidc is None:
        raise NotFoundError("this server has no single sign-on")
    plane.link_oidc(user, state.settings.oidc.issuer, body.subject)
    return {"user": user, "subject": body.subject}
