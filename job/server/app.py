"""The HTTP JSON API (``/api/v1``) over the control plane, as the credential's user.

Every route but ``/api/v1/health``, ``/api/v1/auth/*`` and the OpenAPI description needs
``Authorization: Bearer <token>``. Errors are ``{"error": {"title", "message", "hint"}}`` with 400
(malformed JSON), 401 (no or a bad credential; hint: daggers login), 403 (role), 404 (missing, or another
team's), 409 (conflict; a stale edit also carries ``current_version``), 413 (too large), 422 (invalid
input), 429 (too many failed sign-ins) or 503 (registry unreachable).
"""

# no "from __future__ import annotations": FastAPI reads the routes' annotations, some of them local names

import hashlib
import json
import math
import threading
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from job.control.access import check_name
from job.control.agent import ClusterAgent
from job.control.api import ControlPlane
from job.control.errors import (
    AuthError,
    ControlError,
    NotFoundError,
    PermissionDeniedError,
)
from job.control.models import AuditEntry
from job.control.registry import Registry
from job.control.tokens import Principal, authenticate, issue_oidc_session, split_token
from job.errors import DaggerError
from job.server.auth import OidcVerifier, SigninLimiter
from job.server.bodies import (
    CheckIn,
    ClaimIn,
    ClusterIn,
    CreateIn,
    DatacentreIn,
    EditIn,
    ExpireIn,
    FailoverIn,
    FailoverRoundIn,
    MemberIn,
    MoveIn,
    OidcLinkIn,
    OidcSigninIn,
    PreviewIn,
    PublishIn,
    ReleaseIn,
    ReportIn,
    RollbackIn,
    SpecIn,
    TeamIn,
    TokenIn,
    UserIn,
)
from job.server.errors import (
    ERROR_RESPONSES,
    TooLargeError,
    TooManyError,
    error_body,
    http_error,
    status_of,
    validation_message,
)
from job.server.limits import BodyLimit
from job.server.plain import check_params
from job.server.settings import ServerSettings

API = "/api/v1"
#: The longest range of a dagger's output a chart reads, in seconds (ten years).
MAX_OUTPUT_S = 3660 * 86_400


def create_app(registry: Registry, settings: ServerSettings | None = None) -> FastAPI:
    """Return the API application on ``registry`` (which only it opens)."""
    settings = settings or ServerSettings()
    limiter = SigninLimiter(settings.max_failed_signins, settings.failed_signin_window_s)
    verifier = OidcVerifier(settings.oidc) if settings.oidc else None
    app = FastAPI(title="Daggers control plane", version="1", openapi_url=f"{API}/openapi.json",
                  docs_url=f"{API}/docs", redoc_url=None, responses=ERROR_RESPONSES,
                  dependencies=[Depends(check_params)],
                  description="Every control-plane operation, as the signed-in user, checked and audited.")
    app.add_exception_handler(HTTPException, http_error)
    app.state.registry, app.state.settings = registry, settings

    @app.exception_handler(DaggerError)
    async def _dagger_error(_request: Request, exc: DaggerError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, AuthError) else None
        if isinstance(exc, TooManyError):
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        return JSONResponse(error_body(exc), status_of(exc), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        code, message = validation_message(exc)
        title = "Malformed request" if code == 400 else "Invalid request"
        return JSONResponse({"error": {"title": title, "message": message, "hint": None}}, code)

    def _source(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def _refused_signin(request: Request, token: str | None, why: str) -> None:
        parts = split_token(token) if token else None
        with registry.session() as s:
            s.add(AuditEntry(user="(not signed in)", action=f"sign in: {request.method} {request.url.path}"[:63],
                             target="server", allowed=False, details={"reason": why},
                             credential=f"token:{parts[0]}" if parts else None, source=_source(request)))

    def limited(request: Request, keys: list[str], token: str | None) -> None:
        """Raise TooManyError (audited) when one of ``keys`` has failed too often; the caller's credential
        did not authenticate (a valid one is served whatever the limiter says)."""
        over = limiter.retry_after(keys)
        if over is None:
            return
        key, wait = over
        what = f"from {key.removeprefix('address:')}" if key.startswith("address:") else \
            f"with token {key.removeprefix('token:')}"
        message = f"too many failed sign-ins {what}"
        _refused_signin(request, token, message)
        raise TooManyError(message, retry_after_s=wait,
                           hint=f"wait {math.ceil(wait)} s (a valid credential is served meanwhile)")

    def principal(request: Request) -> Principal:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        presented = token.strip() if scheme.lower() == "bearer" else None
        try:
            return authenticate(registry, presented)  # a valid credential is always served
        except AuthError as exc:
            parts = split_token(presented) if presented else None
            keys = [f"address:{_source(request)}"] + ([f"token:{parts[0]}"] if parts else [])
            limited(request, keys, presented)
            limiter.failed(keys)
            _refused_signin(request, presented, exc.message)
            raise

    Who = Annotated[Principal, Depends(principal)]

    def plane_of(request: Request, who: Who) -> ControlPlane:
        if who.kind == "controller" or who.user is None:
            with registry.session() as s:
                s.add(AuditEntry(user=f"controller of {who.cluster}", action=f"{request.method} {request.url.path}"[:63],
                                 team=None, target="server", allowed=False,
                                 details={"reason": "a controller credential acts only on its cluster's "
                                                    "assignments, state and heartbeat"},
                                 credential=who.credential, source=_source(request)))
            raise PermissionDeniedError(f"a controller credential (cluster {who.cluster}) may not "
                                        f"{request.method} {request.url.path}")
        return ControlPlane(registry, who.user, credential=who.credential, source=_source(request), per_request=True,
                            serves_clients=True)

    Plane = Annotated[ControlPlane, Depends(plane_of)]

    def agent_of(request: Request, cluster: str, who: Who) -> ClusterAgent:
        if who.kind != "controller" or who.cluster != cluster:
            with registry.session() as s:
                s.add(AuditEntry(user=who.user or f"controller of {who.cluster}",
                                 action=f"{request.method} {request.url.path}"[:63], target=f"cluster {cluster}"[:255],
                                 allowed=False, details={"reason": "not this cluster's controller credential"},
                                 credential=who.credential, source=_source(request)))
            raise PermissionDeniedError(f"only cluster {cluster}'s controller credential may do this")
        return ClusterAgent(registry, cluster, min_failover_after_s=settings.failover_after_s)

    Agent = Annotated[ClusterAgent, Depends(agent_of)]

    def spec_ok(text: str) -> str:
        size = len(text.encode())
        if size > settings.max_spec_bytes:
            raise TooLargeError(f"spec: {size:,} bytes is over the limit of {settings.max_spec_bytes:,} bytes")
        return text

    def ref(team: str, name: str) -> str:
        check_name("dagger", name)
        if team == "-":
            return name
        check_name("team", team)
        return f"{team}/{name}"

    spark_lock = threading.Lock()
    spark_box: list[Any] = []

    def preview_session() -> Any:
        """The server's one Spark session for previews, started at the first preview and kept."""
        with spark_lock:
            if not spark_box:
                from job.spark_session import build_session

                spark_box.append(build_session("daggers-server-previews", master="local[2]", shuffle_partitions=2))
            return spark_box[0]

    def table_json(table: Any) -> dict[str, Any]:
        return {"columns": table.column_names, "rows": json.loads(json.dumps(table.to_pylist(), default=str))}

    # ---- open routes ----------------------------------------------------------------------------

    @app.get(f"{API}/health", tags=["server"])
    def health() -> dict[str, Any]:
        """Whether the server is up (no credential needed)."""
        return {"ok": True, "api": "v1"}

    @app.get(f"{API}/auth/oidc", tags=["sign-in"])
    def oidc_config() -> dict[str, Any]:
        """The OIDC provider to sign in with by the device flow (404 when the server has none)."""
        if verifier is None or settings.oidc is None:
            raise NotFoundError("this server has no single sign-on", hint="ask an admin for a personal token")
        conf = verifier.discovery()
        return {"issuer": settings.oidc.issuer, "client_id": settings.oidc.client_id,
                "device_authorization_endpoint": conf.get("device_authorization_endpoint"),
                "token_endpoint": conf.get("token_endpoint")}

    @app.post(f"{API}/auth/oidc/token", tags=["sign-in"])
    def oidc_signin(body: OidcSigninIn, request: Request) -> dict[str, Any]:
        """Exchange a provider's id token for a Daggers token (shown once) of the user its subject maps to."""
        if verifier is None or settings.oidc is None:
            raise NotFoundError("this server has no single sign-on")
        source = _source(request)
        keys = [f"address:{source}"]
        try:  # a source over its limit may still sign in, but its tokens make the server fetch no keys
            subject = verifier.verify(body.id_token, may_refresh=limiter.retry_after(keys) is None)
            user, token = issue_oidc_session(registry, settings.oidc.issuer, subject, settings.oidc.session_ttl_s)
        except AuthError as exc:
            limited(request, keys, None)
            limiter.failed(keys)
            _refused_signin(request, None, exc.message)
            raise
        with registry.session() as s:
            s.add(AuditEntry(user=user, action="sign in", target="server", allowed=True, details={},
                             credential=f"oidc:{subject}", source=source))
        return {"user": user, "token": token, "expires_in_s": settings.oidc.session_ttl_s}

    # ---- identity, users, teams, data centres ------------------------------------------------------

    @app.get(f"{API}/whoami", tags=["users"])
    def whoami(plane: Plane) -> dict[str, Any]:
        """The signed-in user, superuser flag and roles."""
        return {**plane.whoami(), "credential": plane.credential}

    @app.get(f"{API}/users", tags=["users"])
    def users(plane: Plane) -> list[dict[str, Any]]:
        """The users you can see."""
        return plane.users()

    @app.post(f"{API}/users", tags=["users"], status_code=201)
    def add_user(body: UserIn, plane: Plane) -> dict[str, Any]:
        """Add a user (superusers)."""
        plane.add_user(body.name, superuser=body.superuser)
        return {"user": body.name}

    @app.put(f"{API}/users/{{user}}/oidc", tags=["users"])
    def link_oidc(user: str, body: OidcLinkIn, plane: Plane) -> dict[str, Any]:
        """Map an OIDC subject of the server's provider to a user (superusers)."""
        if settings.oidc is None:
            raise NotFoundError("this server has no single sign-on")
        plane.link_oidc(user, settings.oidc.issuer, body.subject)
        return {"user": user, "subject": body.subject}

    @app.get(f"{API}/teams", tags=["teams"])
    def teams(plane: Plane) -> list[dict[str, Any]]:
        """Your teams and their members."""
        return plane.teams()

    @app.post(f"{API}/teams", tags=["teams"], status_code=201)
    def add_team(body: TeamIn, plane: Plane) -> dict[str, Any]:
        """Add a team (superusers)."""
        plane.add_team(body.name)
        return {"team": body.name}

    @app.get(f"{API}/teams/{{team}}/role", tags=["teams"])
    def role_in(team: str, plane: Plane) -> dict[str, Any]:
        """Your role in a team (null: none)."""
        check_name("team", team)
        return {"team": team, "role": plane.role_in(team)}

    @app.put(f"{API}/teams/{{team}}/members/{{user}}", tags=["teams"])
    def set_member(team: str, user: str, body: MemberIn, plane: Plane) -> dict[str, Any]:
        """Give a user a role in a team (superusers and the team's admins)."""
        check_name("team", team)
        check_name("user", user)
        plane.set_member(team, user, body.role)
        return {"team": team, "user": user, "role": body.role}

    @app.delete(f"{API}/teams/{{team}}/members/{{user}}", tags=["teams"])
    def remove_member(team: str, user: str, plane: Plane) -> dict[str, Any]:
        """Remove a user from a team (superusers and the team's admins)."""
        check_name("team", team)
        check_name("user", user)
        plane.remove_member(team, user)
        return {"team": team, "user": user, "role": None}

    @app.get(f"{API}/datacentres", tags=["clusters"])
    def datacentres(plane: Plane) -> list[dict[str, Any]]:
        """The data centres."""
        return plane.datacentres()

    @app.post(f"{API}/datacentres", tags=["clusters"], status_code=201)
    def add_datacentre(body: DatacentreIn, plane: Plane) -> dict[str, Any]:
        """Add a data centre (superusers)."""
        plane.add_datacentre(body.name, body.description)
        return {"datacentre": body.name}

    @app.get(f"{API}/audit", tags=["audit"])
    def audit(plane: Plane, limit: int = 100, target: str | None = None) -> list[dict[str, Any]]:
        """The newest audit entries of your teams."""
        return [a.to_dict() for a in plane.audit(max(1, min(limit, 10_000)), target)]

    # ---- tokens ------------------------------------------------------------------------------------

    @app.get(f"{API}/tokens", tags=["tokens"])
    def tokens(plane: Plane, user: str | None = None) -> list[dict[str, Any]]:
        """Every token (superusers), never their secrets."""
        return [t.to_dict() for t in plane.tokens(user)]

    @app.post(f"{API}/tokens", tags=["tokens"], status_code=201)
    def create_token(body: TokenIn, plane: Plane) -> dict[str, Any]:
        """Make a personal token (superusers) or a cluster's controller token (its team's admins); the token
        is in this answer only."""
        view, token = plane.create_token(body.user, cluster=body.cluster, description=body.description,
                                         expires_in_s=body.expires_in_s)
        return {**view.to_dict(), "token": token}

    @app.post(f"{API}/tokens/{{token_id}}/revoke", tags=["tokens"])
    def revoke_token(token_id: str, plane: Plane) -> dict[str, Any]:
        """Revoke a token now."""
        return plane.revoke_token(_token_id(token_id)).to_dict()

    @app.post(f"{API}/tokens/{{token_id}}/expire", tags=["tokens"])
    def expire_token(token_id: str, body: ExpireIn, plane: Plane) -> dict[str, Any]:
        """Set when a token expires (default: now)."""
        return plane.expire_token(_token_id(token_id), body.at).to_dict()

    # ---- clusters ---------------------------------------------------------------------------------

    @app.get(f"{API}/clusters", tags=["clusters"])
    def clusters(plane: Plane) -> list[dict[str, Any]]:
        """Your teams' clusters."""
        return [c.to_dict() for c in plane.clusters()]

    @app.post(f"{API}/clusters", tags=["clusters"], status_code=201)
    def add_cluster(body: ClusterIn, plane: Plane) -> dict[str, Any]:
        """Add a cluster to a team (superusers and the team's admins)."""
        return plane.add_cluster(body.name, team=body.team, datacentre=body.datacentre,
                                 spark_master=body.spark_master, kafka_bootstrap=body.kafka_bootstrap,
                                 influx_url=body.influx_url, spark_ui_url=body.spark_ui_url,
                                 description=body.description, failover_to=body.failover_to).to_dict()

    @app.get(f"{API}/clusters/{{cluster}}", tags=["clusters"])
    def cluster(cluster: str, plane: Plane) -> dict[str, Any]:
        """One cluster."""
        return plane.cluster(check_name("cluster", cluster)).to_dict()

    @app.put(f"{API}/clusters/{{cluster}}/failover", tags=["clusters"])
    def set_failover(cluster: str, body: FailoverIn, plane: Plane) -> dict[str, Any]:
        """Set the cluster that takes over this one's daggers (the team's admins)."""
        return plane.set_failover(check_name("cluster", cluster), body.failover_to).to_dict()

    @app.get(f"{API}/clusters/{{cluster}}/health", tags=["clusters"])
    def cluster_health(cluster: str, plane: Plane, live: bool = False) -> dict[str, Any]:
        """The cluster's health: recorded by its controller, or probed now with ``live``."""
        return plane.cluster_health(check_name("cluster", cluster), live=live)

    @app.get(f"{API}/clusters/{{cluster}}/topics", tags=["clusters"])
    def cluster_topics(cluster: str, plane: Plane) -> list[str]:
        """The topics on the cluster's brokers."""
        return plane.cluster_topics(check_name("cluster", cluster))

    # ---- daggers ---------------------------------------------------------------------------------

    @app.get(f"{API}/daggers", tags=["daggers"])
    def daggers(plane: Plane, cluster: str | None = None, search: str | None = None) -> list[dict[str, Any]]:
        """The daggers of your teams (of one cluster; names containing ``search``)."""
        return [d.to_dict() for d in plane.daggers(check_name("cluster", cluster) if cluster else None, search)]

    @app.get(f"{API}/screens/overview", tags=["console"])
    def overview(request: Request, plane: Plane) -> Response:
        """Everything the console's main screens show, in one answer: your clusters and daggers. Send the
        last ``ETag`` as ``If-None-Match``: 304 when nothing changed."""
        body = json.dumps({"clusters": [c.to_dict() for c in plane.clusters()],
                           "daggers": [d.to_dict() for d in plane.daggers()]}, default=str).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        return Response(body, media_type="application/json", headers={"ETag": etag})

    @app.post(f"{API}/daggers", tags=["daggers"], status_code=201)
    def create(body: CreateIn, plane: Plane) -> dict[str, Any]:
        """Create a dagger from a spec (version 1); deploy it at once with ``deploy``."""
        return plane.create(body.cluster, spec_ok(body.spec), deploy=body.deploy, comment=body.comment).to_dict()

    @app.post(f"{API}/validate", tags=["daggers"])
    def validate(body: SpecIn, plane: Plane) -> dict[str, Any]:
        """Check a spec for a cluster without running it."""
        return plane.validate(body.cluster, spec_ok(body.spec)).to_dict()

    @app.post(f"{API}/preview", tags=["daggers"])
    def preview_text(body: SpecIn, plane: Plane) -> dict[str, Any]:
        """Preview a spec that is not a dagger yet (Spark runs in the server)."""
        if not settings.allow_preview:
            raise ControlError("this server does not run previews")
        return table_json(plane.preview_text(body.cluster, spec_ok(body.spec), minutes=body.minutes,
                                             limit=body.limit, spark_factory=preview_session))

    D = f"{API}/daggers/{{team}}/{{name}}"

    @app.get(D, tags=["daggers"])
    def dagger(team: str, name: str, plane: Plane) -> dict[str, Any]:
        """One dagger (team ``-``: the one of that name in your teams)."""
        return plane.dagger(ref(team, name)).to_dict()

    @app.get(f"{D}/screen", tags=["console"])
    def dagger_screen(team: str, name: str, plane: Plane, samples: int = 120, audit: int = 50) -> dict[str, Any]:
        """Everything the console's dagger screen shows: the dagger, samples, versions, audit entries."""
        return plane.dagger_screen(ref(team, name), max(1, min(samples, 10_000)), max(1, min(audit, 1_000))).to_dict()

    @app.get(f"{D}/fusible", tags=["daggers"])
    def fusible(team: str, name: str, plane: Plane) -> dict[str, Any]:
        """The dagger's isolation and the daggers it could be one query with."""
        isolation, partners = plane.fusible_with(ref(team, name))
        return {"isolation": isolation, "fusible_with": partners}

    @app.get(f"{D}/samples", tags=["daggers"])
    def samples(team: str, name: str, plane: Plane, limit: int = 120) -> list[dict[str, Any]]:
        """The dagger's last progress samples, oldest first."""
        return [x.to_dict() for x in plane.samples(ref(team, name), max(1, min(limit, 10_000)))]

    @app.get(f"{D}/moves", tags=["daggers"])
    def moves(team: str, name: str, plane: Plane) -> list[dict[str, Any]]:
        """The dagger's moves between clusters."""
        return [x.to_dict() for x in plane.moves(ref(team, name))]

    @app.get(f"{D}/versions", tags=["daggers"])
    def history(team: str, name: str, plane: Plane) -> list[dict[str, Any]]:
        """Every spec version."""
        return [x.to_dict() for x in plane.history(ref(team, name))]

    @app.get(f"{D}/versions/{{number}}", tags=["daggers"])
    def version(team: str, name: str, number: int, plane: Plane) -> dict[str, Any]:
        """One spec version (0: the current one)."""
        return plane.version(ref(team, name), number or None).to_dict()

    @app.get(f"{D}/output", tags=["daggers"])
    def output(team: str, name: str, plane: Plane, field: str,
               since_s: Annotated[int, Query(le=MAX_OUTPUT_S)] = 900,
               step_s: Annotated[int | None, Query(ge=1, le=MAX_OUTPUT_S)] = None,
               until: str | None = None, tag: str | None = None, compare: str = "",
               sink: str | None = None) -> dict[str, Any]:
        """The dagger's own output read back from its sink: the sum of ``field`` per step, now and the
        periods it compares with (``compare``: ``D-1``, ``D-7`` or both, comma-separated; ``tag``: ``k=v``)."""
        from job.output.model import OutputQuery, parse_compare, parse_iso, parse_tag

        query = OutputQuery(field=field, since_s=max(1, since_s), step_s=step_s,
                            until=parse_iso(until) if until else None, tag=parse_tag(tag),
                            compare=tuple(parse_compare(compare)))
        return plane.output(ref(team, name), query, sink).to_dict()

    @app.get(f"{D}/output/fields", tags=["daggers"])
    def output_fields(team: str, name: str, plane: Plane, sink: str | None = None) -> dict[str, Any]:
        """The numeric fields the dagger's sink holds (what its output chart may show)."""
        return {"fields": plane.output_fields(ref(team, name), sink)}

    @app.get(f"{D}/diff", tags=["daggers"])
    def diff(team: str, name: str, plane: Plane, a: int | None = None, b: int | None = None) -> dict[str, Any]:
        """The diff between two spec versions."""
        return {"diff": plane.diff(ref(team, name), a, b)}

    def _desired(action: str) -> Callable[..., dict[str, Any]]:
        def route(team: str, name: str, plane: Plane) -> dict[str, Any]:
            return getattr(plane, action)(ref(team, name)).to_dict()
        route.__name__ = action
        route.__doc__ = {"deploy": "Run the dagger's current version.", "stop": "Stop the dagger gracefully.",
                         "restart": "Stop and start the dagger.", "delete": "Delete the dagger (team admins)."}[action]
        return route

    for action in ("deploy", "stop", "restart"):
        app.post(f"{D}/{action}", tags=["daggers"])(_desired(action))
    app.delete(D, tags=["daggers"])(_desired("delete"))

    @app.post(f"{D}/move", tags=["daggers"])
    def move(team: str, name: str, body: MoveIn, plane: Plane) -> dict[str, Any]:
        """Move the dagger to another cluster of its team."""
        return plane.move(ref(team, name), body.cluster, reason=body.reason).to_dict()

    @app.post(f"{D}/check-edit", tags=["daggers"])
    def check_edit(team: str, name: str, body: CheckIn, plane: Plane) -> dict[str, Any]:
        """Whether a spec could resume from the dagger's checkpoint (changes nothing)."""
        return plane.check_edit(ref(team, name), spec_ok(body.spec)).to_dict()

    @app.put(f"{D}/spec", tags=["daggers"])
    def edit(team: str, name: str, body: EditIn, plane: Plane) -> dict[str, Any]:
        """Make a spec the dagger's next version. 409 with ``current_version`` when someone else made a
        version after ``expected_version``."""
        return plane.edit(ref(team, name), spec_ok(body.spec), expected_version=body.expected_version,
                          allow_fresh_start=body.allow_fresh_start, comment=body.comment).to_dict()

    @app.post(f"{D}/rollback", tags=["daggers"])
    def rollback(team: str, name: str, body: RollbackIn, plane: Plane) -> dict[str, Any]:
        """Make an earlier version's spec the next version."""
        return plane.rollback(ref(team, name), body.to_version, allow_fresh_start=body.allow_fresh_start).to_dict()

    @app.post(f"{D}/publish", tags=["daggers"])
    def publish(team: str, name: str, body: PublishIn, plane: Plane) -> dict[str, Any]:
        """Publish the dagger's rows to a Kafka topic too (a new version)."""
        return plane.publish_to_kafka(ref(team, name), body.topic, bootstrap_servers=body.bootstrap_servers,
                                      fmt=body.format, proto_class=body.proto_class).to_dict()

    @app.post(f"{D}/preview", tags=["daggers"])
    def preview(team: str, name: str, body: PreviewIn, plane: Plane) -> dict[str, Any]:
        """Run the dagger's SQL over the last minutes of its topics (Spark runs in the server)."""
        if not settings.allow_preview:
            raise ControlError("this server does not run previews")
        return table_json(plane.preview(ref(team, name), minutes=body.minutes, limit=body.limit,
                                        spark_factory=preview_session))

    # ---- controllers ------------------------------------------------------------------------------

    C = f"{API}/controller/{{cluster}}"

    @app.get(f"{C}/settings", tags=["controller"])
    def ctl_settings(agent: Agent) -> dict[str, Any]:
        """The cluster's Spark, Kafka and InfluxDB addresses (its controller's credential only)."""
        return agent.settings()

    @app.get(f"{C}/assignments", tags=["controller"])
    def assignments(agent: Agent) -> list[dict[str, Any]]:
        """The cluster's daggers to run, stop or hand over (its controller's credential only)."""
        return agent.assignments()

    @app.get(f"{C}/holder", tags=["controller"])
    def holder(agent: Agent) -> dict[str, Any]:
        """The controller recorded for the cluster (its controller's credential only)."""
        host, pid = agent.holder()
        return {"host": host, "pid": pid}

    @app.post(f"{C}/claim", tags=["controller"])
    def claim(body: ClaimIn, agent: Agent) -> dict[str, Any]:
        """Record the caller as the cluster's controller; 409 when another one is alive."""
        agent.claim(body.host, body.pid, body.stale_s, body.gone, body.metrics_url)
        return {"ok": True}

    @app.post(f"{C}/release", tags=["controller"])
    def release(body: ReleaseIn, agent: Agent) -> dict[str, Any]:
        """Clear the caller's heartbeat when it is still the cluster's controller."""
        agent.release(body.host, body.pid)
        return {"ok": True}

    @app.post(f"{C}/failover", tags=["controller"])
    def failover(body: FailoverRoundIn, agent: Agent) -> dict[str, Any]:
        """Take over the daggers of clusters that fail over to this one and whose controller has been silent,
        by the server's clock, for the server's ``failover_after_s`` (or the longer ``after_s``)."""
        return {"moved": agent.fail_over(body.after_s)}

    @app.post(f"{C}/report", tags=["controller"])
    def report(body: ReportIn, agent: Agent) -> dict[str, Any]:
        """Write one round: the cluster's daggers' status, samples, hand-overs and health; the heartbeat is
        the server's time."""
        agent.report(body.updates, body.samples, body.health, body.handed, body.host, body.pid,
                     body.prune_before, body.metrics_url)
        return {"ok": True}

    return _with_limit(app, settings.max_body_bytes)


def _token_id(token_id: str) -> str:
    if len(token_id) != 12 or any(ch not in "0123456789abcdef" for ch in token_id):
        raise NotFoundError(f"no token {token_id[:40]!r}")
    return token_id


def _with_limit(app: FastAPI, limit: int) -> FastAPI:
    app.add_middleware(BodyLimit, limit=limit)
    return app


def routes(app: FastAPI) -> list[tuple[str, str]]:
    """Return every (method, path) the application serves, for tests and docs."""
    out = []
    for r in app.routes:
        for method in sorted(getattr(r, "methods", None) or ()):
            if method not in ("HEAD", "OPTIONS"):
                out.append((method, r.path))  # type: ignore[attr-defined]
    return out

