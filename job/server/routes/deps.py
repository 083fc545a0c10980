"""What the routes depend on: the server's state, the signed-in caller, their control plane or cluster agent."""

# no "from __future__ import annotations": FastAPI reads the dependencies' annotations

import json
import math
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from job.control.access import check_name
from job.control.agent import ClusterAgent
from job.control.api import ControlPlane
from job.control.errors import AuthError, PermissionDeniedError
from job.control.models import AuditEntry
from job.control.registry import Registry
from job.control.tokens import Principal, authenticate, split_token
from job.server.auth import OidcVerifier, SigninLimiter
from job.server.errors import TooLargeError, TooManyError
from job.server.settings import ServerSettings

API = "/api/v1"


@dataclass
class ServerState:
    """What every request of one application shares: the registry (which only it opens), the settings, the
    sign-in limiter, the OIDC verifier and the Spark session of previews (started at the first preview)."""

    registry: Registry
    settings: ServerSettings
    limiter: SigninLimiter
    verifier: OidcVerifier | None
    _spark_lock: threading.Lock = field(default_factory=threading.Lock)
    _spark: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, registry: Registry, settings: ServerSettings) -> "ServerState":
        """Return the state of an application on ``registry`` with ``settings``."""
        return cls(
            registry,
            settings,
            SigninLimiter(settings.max_failed_signins, settings.failed_signin_window_s),
            OidcVerifier(settings.oidc) if settings.oidc else None,
        )

    def preview_session(self) -> Any:
        """The server's one Spark session for previews, started at the first preview and kept."""
        with self._spark_lock:
            if not self._spark:
                from job.spark.session import build_session

                self._spark.append(
                    build_session("daggers-server-previews", master="local[2]", shuffle_partitions=2)
                )
            return self._spark[0]


def server_state(request: Request) -> ServerState:
    """Return the state of the application serving ``request``."""
    state: ServerState = request.app.state.server
    return state


State = Annotated[ServerState, Depends(server_state)]


def source(request: Request) -> str:
    """Return the address the request came from."""
    return request.client.host if request.client else "unknown"


def refused_signin(state: ServerState, request: Request, token: str | None, why: str) -> None:
    """Audit a refused sign-in (a bad credential, or too many of them)."""
    parts = split_token(token) if token else None
    with state.registry.session() as s:
        s.add(
            AuditEntry(
                user="(not signed in)",
                action=f"sign in: {request.method} {request.url.path}"[:63],
                target="server",
                allowed=False,
                details={"reason": why},
                credential=f"token:{parts[0]}" if parts else None,
                source=source(request),
            )
        )


def limited(state: ServerState, request: Request, keys: list[str], token: str | None) -> None:
    """Raise TooManyError (audited) when one of ``keys`` has failed too often; the caller's credential
    did not authenticate (a valid one is served whatever the limiter says)."""
    over = state.limiter.retry_after(keys)
    if over is None:
        return
    key, wait = over
    what = (
        f"from {key.removeprefix('address:')}"
        if key.startswith("address:")
        else f"with token {key.removeprefix('token:')}"
    )
    message = f"too many failed sign-ins {what}"
    refused_signin(state, request, token, message)
    raise TooManyError(
        message, retry_after_s=wait, hint=f"wait {math.ceil(wait)} s (a valid credential is served meanwhile)"
    )


def principal(request: Request) -> Principal:
    """Return who the request's bearer token belongs to; a failure counts towards the sign-in limit."""
    state = server_state(request)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    presented = token.strip() if scheme.lower() == "bearer" else None
    try:
        return authenticate(state.registry, presented)  # a valid credential is always served
    except AuthError as exc:
        parts = split_token(presented) if presented else None
        keys = [f"address:{source(request)}"] + ([f"token:{parts[0]}"] if parts else [])
        limited(state, request, keys, presented)
        state.limiter.failed(keys)
        refused_signin(state, request, presented, exc.message)
        raise


Who = Annotated[Principal, Depends(principal)]


def plane_of(request: Request, who: Who) -> ControlPlane:
    """Return the control plane as the signed-in user; a controller's credential is refused (audited)."""
    registry = server_state(request).registry
    if who.kind == "controller" or who.user is None:
        with registry.session() as s:
            s.add(
                AuditEntry(
                    user=f"controller of {who.cluster}",
                    action=f"{request.method} {request.url.path}"[:63],
                    team=None,
                    target="server",
                    allowed=False,
                    details={
                        "reason": "a controller credential acts only on its cluster's "
                        "assignments, state and heartbeat"
                    },
                    credential=who.credential,
                    source=source(request),
                )
            )
        raise PermissionDeniedError(
            f"a controller credential (cluster {who.cluster}) may not {request.method} {request.url.path}"
        )
    return ControlPlane(
        registry,
        who.user,
        credential=who.credential,
        source=source(request),
        per_request=True,
        serves_clients=True,
    )


Plane = Annotated[ControlPlane, Depends(plane_of)]


def agent_of(request: Request, cluster: str, who: Who) -> ClusterAgent:
    """Return the agent of ``cluster`` for its own controller's credential; any other is refused (audited)."""
    state = server_state(request)
    if who.kind != "controller" or who.cluster != cluster:
        with state.registry.session() as s:
            s.add(
                AuditEntry(
                    user=who.user or f"controller of {who.cluster}",
                    action=f"{request.method} {request.url.path}"[:63],
                    target=f"cluster {cluster}"[:255],
                    allowed=False,
                    details={"reason": "not this cluster's controller credential"},
                    credential=who.credential,
                    source=source(request),
                )
            )
        raise PermissionDeniedError(f"only cluster {cluster}'s controller credential may do this")
    return ClusterAgent(state.registry, cluster, min_failover_after_s=state.settings.failover_after_s)


Agent = Annotated[ClusterAgent, Depends(agent_of)]


def spec_ok(state: ServerState, text: str) -> str:
    """Return ``text`` when it is within the server's spec size limit and carries no code this server does not
    take. Raises TooLargeError (the size) or SpecError (``udf_file_base64`` without ``allow_carried_udfs``)."""
    size = len(text.encode())
    if size > state.settings.max_spec_bytes:
        raise TooLargeError(
            f"spec: {size:,} bytes is over the limit of {state.settings.max_spec_bytes:,} bytes"
        )
    if not state.settings.allow_carried_udfs and _carries_code(text):
        from job.errors import SpecError
        from job.spec.udf_carried import CARRIED

        raise SpecError(
            f"{CARRIED}: this server takes no udf_file code from a client (it would run on the controller's "
            "host, as the controller's user)",
            hint="name a udf_file an operator placed on the controller's host (an absolute path), or ask the "
            "operator to start daggers server --allow-carried-udfs",
        )
    return text


def _carries_code(text: str) -> bool:
    """Whether the spec ``text``'s top level has a ``udf_file_base64`` key (any text that does not parse is
    left to the spec's own checks, which refuse it)."""
    from job.control.specs import raw_spec
    from job.spec.udf_carried import CARRIED

    if CARRIED not in text:
        return False
    try:
        return CARRIED in raw_spec(text)
    except Exception:  # noqa: BLE001 - not a spec: its own checks say why
        return False


def ref(team: str, name: str) -> str:
    """Return the dagger reference of a path's team and name (team ``-``: the name alone)."""
    check_name("dagger", name)
    if team == "-":
        return name
    check_name("team", team)
    return f"{team}/{name}"


def table_json(table: Any) -> dict[str, Any]:
    """Return an Arrow table as ``{"columns": [...], "rows": [...]}``."""
    return {"columns": table.column_names, "rows": json.loads(json.dumps(table.to_pylist(), default=str))}
