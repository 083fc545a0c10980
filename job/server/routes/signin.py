"""``/auth/oidc``: single sign-on, the provider to use and the exchange of its id token for a Daggers token."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from typing import Any

from fastapi import APIRouter, Request

from job.control.errors import AuthError, NotFoundError
from job.control.models import AuditEntry
from job.control.tokens import issue_oidc_session
from job.server.bodies import OidcSigninIn
from job.server.routes.deps import API, State, limited, refused_signin, source

router = APIRouter(prefix=API, tags=["sign-in"])


@router.get("/auth/oidc")
def oidc_config(state: State) -> dict[str, Any]:
    """The OIDC provider to sign in with by the device flow (404 when the server has none)."""
    if state.verifier is None or state.settings.oidc is None:
        raise NotFoundError("this server has no single sign-on", hint="ask an admin for a personal token")
    conf = state.verifier.discovery()
    return {
        "issuer": state.settings.oidc.issuer,
        "client_id": state.settings.oidc.client_id,
        "device_authorization_endpoint": conf.get("device_authorization_endpoint"),
        "token_endpoint": conf.get("token_endpoint"),
    }


@router.post("/auth/oidc/token")
def oidc_signin(body: OidcSigninIn, request: Request, state: State) -> dict[str, Any]:
    """Exchange a provider's id token for a Daggers token (shown once) of the user its subject maps to."""
    if state.verifier is None or state.settings.oidc is None:
        raise NotFoundError("this server has no single sign-on")
    address = source(request)
    keys = [f"address:{address}"]
    try:  # a source over its limit may still sign in, but its tokens make the server fetch no keys
        subject = state.verifier.verify(body.id_token, may_refresh=state.limiter.retry_after(keys) is None)
        user, token = issue_oidc_session(
            state.registry, state.settings.oidc.issuer, subject, state.settings.oidc.session_ttl_s
        )
    except AuthError as exc:
        limited(state, request, keys, None)
        state.limiter.failed(keys)
        refused_signin(state, request, None, exc.message)
        raise
    with state.registry.session() as s:
        s.add(
            AuditEntry(
                user=user,
                action="sign in",
                target="server",
                allowed=True,
                details={},
                credential=f"oidc:{subject}",
                source=address,
            )
        )
    return {"user": user, "token": token, "expires_in_s": state.settings.oidc.session_ttl_s}
