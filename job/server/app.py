"""The HTTP JSON API (``/api/v1``) over the control plane, as the credential's user.

Every route but ``/api/v1/health``, ``/api/v1/auth/*`` and the OpenAPI description needs
``Authorization: Bearer <token>``. Errors are ``{"error": {"title", "message", "hint"}}`` with 400
(malformed JSON), 401 (no or a bad credential; hint: daggers login), 403 (role), 404 (missing, or another
team's), 409 (conflict; a stale edit also carries ``current_version``), 413 (too large), 422 (invalid
input), 429 (too many failed sign-ins) or 503 (registry unreachable).
"""

# no "from __future__ import annotations": FastAPI reads the handlers' annotations

import math

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from job.control.errors import AuthError
from job.control.registry import Registry
from job.errors import DaggerError
from job.server.errors import (
    ERROR_RESPONSES,
    TooManyError,
    error_body,
    http_error,
    status_of,
    validation_message,
)
from job.server.limits import BodyLimit
from job.server.plain import check_params
from job.server.routes import ROUTERS
from job.server.routes.deps import API, ServerState
from job.server.settings import ServerSettings


def create_app(registry: Registry, settings: ServerSettings | None = None) -> FastAPI:
    """Return the API application on ``registry`` (which only it opens)."""
    settings = settings or ServerSettings()
    app = FastAPI(
        title="Daggers control plane",
        version="1",
        openapi_url=f"{API}/openapi.json",
        docs_url=f"{API}/docs",
        redoc_url=None,
        responses=ERROR_RESPONSES,
        dependencies=[Depends(check_params)],
        description="Every control-plane operation, as the signed-in user, checked and audited.",
    )
    app.add_exception_handler(HTTPException, http_error)
    # Starlette types a handler for any exception; these two are registered for their own class only
    app.add_exception_handler(DaggerError, _dagger_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.state.registry, app.state.settings = registry, settings
    app.state.server = ServerState.of(registry, settings)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app


async def _dagger_error(_request: Request, exc: DaggerError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, AuthError) else None
    if isinstance(exc, TooManyError):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return JSONResponse(error_body(exc), status_of(exc), headers=headers)


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    code, message = validation_message(exc, request)
    title = "Malformed request" if code == 400 else "Invalid request"
    return JSONResponse({"error": {"title": title, "message": message, "hint": None}}, code)


def routes(app: FastAPI) -> list[tuple[str, str]]:
    """Return every (method, path) the application serves, for tests and docs."""
    out = []
    for r in app.routes:
        included = getattr(r, "original_router", None)  # a router FastAPI keeps whole when it is included
        for route in included.routes if included is not None else [r]:
            for method in sorted(getattr(route, "methods", None) or ()):
                if method not in ("HEAD", "OPTIONS"):
                    out.append((method, str(getattr(route, "path", ""))))
    return out
