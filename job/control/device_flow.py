"""Signing in to a server with OpenID Connect's device flow (RFC 8628), from a terminal.

The server names its provider (``GET /api/v1/auth/oidc``); the user opens the provider's page and types
the code shown; the provider's id token is then exchanged at the server for a Daggers token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from job.control.errors import AuthError, ControlError

GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def device_signin(
    server: str, *, verify: bool | str = True, show: Callable[[str, str], None], timeout_s: float = 600.0
) -> dict[str, Any]:
    """Sign in to ``server`` by the device flow; ``show(url, user_code)`` tells the user where to go.

    Returns the server's answer ({user, token, expires_in_s}). Raises AuthError when the user refuses or
    the code expires, ControlError when the server or the provider cannot be reached.
    """
    api = server.rstrip("/") + "/api/v1"
    try:
        conf = requests.get(f"{api}/auth/oidc", verify=verify, timeout=30)
        if conf.status_code == 404:
            raise ControlError(f"the server {server} has no single sign-on", hint="ask an admin for a token")
        conf.raise_for_status()
        oidc = conf.json()
        start = requests.post(
            oidc["device_authorization_endpoint"],
            timeout=30,
            data={"client_id": oidc["client_id"], "scope": "openid profile"},
        )
        start.raise_for_status()
        grant = start.json()
    except (requests.RequestException, ValueError, KeyError) as exc:
        raise ControlError(f"single sign-on cannot start: {type(exc).__name__}") from None
    show(grant.get("verification_uri_complete") or grant["verification_uri"], grant["user_code"])
    interval = float(grant.get("interval", 5))
    deadline = time.monotonic() + min(timeout_s, float(grant.get("expires_in", timeout_s)))
    while time.monotonic() < deadline:
        time.sleep(interval)
        r = requests.post(
            oidc["token_endpoint"],
            timeout=30,
            data={"grant_type": GRANT, "device_code": grant["device_code"], "client_id": oidc["client_id"]},
        )
        body = r.json()
        if r.status_code == 200 and body.get("id_token"):
            answer = requests.post(
                f"{api}/auth/oidc/token", json={"id_token": body["id_token"]}, verify=verify, timeout=30
            )
            if answer.status_code != 200:
                e = answer.json().get("error", {})
                raise AuthError(
                    e.get("message", f"the server answered {answer.status_code}"), hint=e.get("hint")
                )
            token = answer.json()
            if not isinstance(token, dict):
                raise AuthError(f"the server answered a {type(token).__name__}, not a credential")
            return token
        error = body.get("error")
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending":
            raise AuthError(
                f"single sign-on did not complete: {error}", hint="daggers login --server URL --oidc"
            )
    raise AuthError(
        "single sign-on timed out: the code was not entered in time", hint="daggers login --server URL --oidc"
    )
