"""``/teams``: teams, their members and the signed-in user's role in one."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter

from job.control.access import check_name
from job.server.bodies import MemberIn, TeamIn
from job.server.routes.deps import API, Plane

router = APIRouter(prefix=API, tags=["teams"])


@router.get("/teams")
def teams(plane: Plane) -> list[dict[str, Any]]:
    """Your teams and their members."""
    return plane.teams()


@router.post("/teams", status_code=201)
def add_team(body: TeamIn, plane: Plane) -> dict[str, Any]:
    """Add a team (superusers)."""
    plane.add_team(body.name)
    return {"team": body.name}


@router.get("/teams/{team}/role")
def role_in(team: str, plane: Plane) -> dict[str, Any]:
    """Your role in a team (null: none)."""
    check_name("team", team)
    return {"team": team, "role": plane.role_in(team)}


@router.put("/teams/{team}/members/{user}")
def set_member(team: str, user: str, body: MemberIn, plane: Plane) -> dict[str, Any]:
    """Give a user a role in a team (superusers and the team's admins)."""
    check_name("team", team)
    check_name("user", user)
    plane.set_member(team, user, body.role)
    return {"team": team, "user": user, "role": body.role}


@router.delete("/teams/{team}/members/{user}")
def remove_member(team: str, user: str, plane: Plane) -> dict[str, Any]:
    """Remove a user from a team (superusers and the team's admins)."""
    check_name("team", team)
    check_name("user", user)
    plane.remove_member(team, user)
    return {"team": team, "user": user, "role": None}
