"""An OpenID Connect provider for tests, on 127.0.0.1, built with authlib: discovery, JWKS, the device
authorization endpoint and the token endpoint of RFC 8628 (authlib's DeviceAuthorizationEndpoint and
DeviceCodeGrant), id tokens signed RS256 (joserfc, authlib's JOSE library) with a key made at start. ``approve(user_code, subject)`` is the
user typing the code on the provider's page and signing in as ``subject``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from authlib.oauth2.rfc6749 import AuthorizationServer, ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc8628 import DeviceAuthorizationEndpoint, DeviceCodeGrant, DeviceCredentialDict
from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.helpers import wait_until

CLIENT_ID = "daggers"


class _Client(ClientMixin):
    def get_client_id(self) -> str:
        return CLIENT_ID

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == DeviceCodeGrant.GRANT_TYPE

    def get_allowed_scope(self, scope: str) -> str:
        return scope


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, form: dict[str, str], headers: dict[str, str]) -> None:
        super().__init__(method, uri, headers=headers)
        self._form = form
        self.payload = BasicOAuth2Payload(form)

    @property
    def args(self) -> dict[str, str]:
        return {}

    @property
    def form(self) -> dict[str, str]:
        return self._form


class Provider:
    """The provider's state: device credentials, the users' approvals, the signing key, the issuer URL."""

    def __init__(self) -> None:
        self.issuer = ""
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key"})
        self.credentials: dict[str, DeviceCredentialDict] = {}
        self.grants: dict[str, tuple[str, bool]] = {}
        self.server = self._server()

    def approve(self, user_code: str, subject: str, approved: bool = True) -> None:
        """The user enters ``user_code`` on the provider's page, signed in as ``subject``."""
        self.grants[user_code] = (subject, approved)

    def id_token(
        self, subject: str, *, audience: str = CLIENT_ID, lifetime_s: int = 300, key: Any = None
    ) -> str:
        """Return an id token for ``subject`` signed with the provider's key (or ``key``)."""
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": subject, "aud": audience, "iat": now, "exp": now + lifetime_s}
        k = key or self.key
        return jwt.encode({"alg": "RS256", "kid": k.kid}, claims, k)

    def _server(self) -> AuthorizationServer:
        provider = self

        class Server(AuthorizationServer):
            def query_client(self, client_id: str) -> _Client | None:
                return _Client() if client_id == CLIENT_ID else None

            def save_token(self, token: dict[str, Any], request: Any) -> None:
                pass

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                pass

            def create_oauth2_request(self, request: _Request) -> _Request:
                return request

            def handle_response(self, status: int, body: Any, headers: Any) -> JSONResponse:
                return JSONResponse(body, status, headers=dict(headers))

        class Endpoint(DeviceAuthorizationEndpoint):
            CLIENT_AUTH_METHODS = ["none"]

            def get_verification_uri(self) -> str:
                return f"{provider.issuer}/activate"

            def save_device_credential(self, client_id: str, scope: str, data: dict[str, Any]) -> None:
                provider.credentials[data["device_code"]] = DeviceCredentialDict(
                    client_id=client_id, scope=scope, expires_at=time.time() + data["expires_in"], **data
                )

        class Grant(DeviceCodeGrant):
            def query_device_credential(self, device_code: str) -> DeviceCredentialDict | None:
                return provider.credentials.get(device_code)

            def query_user_grant(self, user_code: str) -> tuple[str, bool] | None:
                return provider.grants.get(user_code)

            def should_slow_down(self, credential: Any) -> bool:
                return False

        def tokens(
            grant_type: str,
            client: Any,
            user: Any = None,
            scope: Any = None,
            expires_in: Any = None,
            include_refresh_token: bool = True,
        ) -> dict[str, Any]:
            return {
                "token_type": "Bearer",
                "access_token": "opaque-access",
                "expires_in": 300,
                "id_token": provider.id_token(str(user)),
            }

        server = Server()
        server.register_endpoint(Endpoint)
        server.register_grant(Grant)
        server.register_token_generator("default", tokens)
        Endpoint.INTERVAL = 1
        return server

    def app(self) -> Starlette:
        """Return the provider's web application."""

        async def form_request(request: Request) -> _Request:
            form = {k: str(v) for k, v in (await request.form()).items()}
            return _Request(request.method, str(request.url), form, dict(request.headers))

        async def discovery(_request: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "jwks_uri": f"{self.issuer}/jwks",
                    "device_authorization_endpoint": f"{self.issuer}/device",
                    "token_endpoint": f"{self.issuer}/token",
                    "id_token_signing_alg_values_supported": ["RS256"],
                }
            )

        async def jwks(_request: Request) -> JSONResponse:
            return JSONResponse({"keys": [self.key.as_dict(private=False)]})

        async def device(request: Request) -> Any:
            return self.server.create_endpoint_response("device_authorization", await form_request(request))

        async def token(request: Request) -> Any:
            return self.server.create_token_response(await form_request(request))

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/jwks", jwks),
                Route("/device", device, methods=["POST"]),
                Route("/token", token, methods=["POST"]),
            ]
        )


@contextmanager
def running_provider() -> Iterator[Provider]:
    """Run a provider on a free port of 127.0.0.1 (in a thread); yield it; stop it."""
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"  # plain HTTP on the loopback, for the test only
    provider = Provider()
    server = uvicorn.Server(uvicorn.Config(provider.app(), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until("the OIDC provider to start", lambda: server.started, 30, every_s=0.05)
    provider.issuer = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        yield provider
    finally:
        server.should_exit = True
        thread.join(10)
