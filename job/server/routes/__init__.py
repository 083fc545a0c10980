"""The API's routes, one FastAPI router per resource; :data:`ROUTERS` in the order the application serves them.

Their dependencies (the server's state, the signed-in caller, their control plane or cluster agent) are in
:mod:`job.server.routes.deps`.
"""

from fastapi import APIRouter

from job.server.routes import (
    audit,
    clusters,
    controller,
    dagger_actions,
    daggers,
    datacentres,
    health,
    signin,
    teams,
    tokens,
    users,
)

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    signin.router,
    users.router,
    teams.router,
    datacentres.router,
    audit.router,
    tokens.router,
    clusters.router,
    daggers.router,
    dagger_actions.router,
    controller.router,
)
