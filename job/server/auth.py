"""Signing in: the failed-sign-in limiter and the verification of OIDC id tokens."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from job.control.errors import AuthError
from job.server.settings import OidcSettings


class SigninLimiter:
    """Counts failed sign-ins per source address over a sliding window."""

    def __init__(self, max_failures: int, window_s: float) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, source: str, at: float) -> deque[float]:
        q = self._failures.setdefault(source, deque())
        while q and q[0] <= at - self.window_s:
            q.popleft()
        return q

    def retry_after(self, source: str) -> float | None:
        """Return the seconds until ``source`` may try again, or None when it may try now."""
        at = time.monotonic()
        with self._lock:
            q = self._recent(source, at)
            if len(q) < self.max_failures:
                return None
            return max(q[0] + self.window_s - at, 0.1)

    def failed(self, source: str) -> None:
        """Count one failed sign-in from ``source``."""
        at = time.monotonic()
        with self._lock:
            self._recent(source, at).append(at)
            if len(self._failures) > 10_000:  # forget idle sources so the table cannot grow without end
                for key in [k for k, v in self._failures.items() if not v][:5_000]:
                    del self._failures[key]


class OidcVerifier:
    """Verifies id tokens of one OpenID Connect provider (signature by its JWKS, issuer, audience, expiry)."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._config: dict[str, Any] | None = None
        self._jwks: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def discovery(self) -> dict[str, Any]:
        """Return the provider's OpenID configuration (fetched once). Raises AuthError when unreachable."""
        import requests

        with self._lock:
            if self._config is None:
                url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
                try:
                    answer = requests.get(url, timeout=10)
                    answer.raise_for_status()
                    self._config = answer.json()
                except (requests.RequestException, ValueError) as exc:
                    raise AuthError(f"the OIDC provider {self.settings.issuer} cannot be reached: "
                                    f"{type(exc).__name__}") from None
            return self._config

    def _keys(self, refresh: bool = False) -> dict[str, Any]:
        import requests

        if self._jwks is None or refresh:
            try:
                answer = requests.get(self.discovery()["jwks_uri"], timeout=10)
                answer.raise_for_status()
                self._jwks = answer.json()
            except (requests.RequestException, ValueError, KeyError) as exc:
                raise AuthError(f"the OIDC provider's keys cannot be read: {type(exc).__name__}") from None
        return self._jwks

    def verify(self, id_token: str) -> str:
        """Return the subject of a valid id token; raise AuthError (without the token) otherwise."""
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError
        from joserfc.jwk import KeySet

        hint = "sign in again: daggers login --server URL --oidc"
        claims = jwt.JWTClaimsRegistry(leeway=30, iss={"essential": True, "value": self.settings.issuer},
                                       aud={"essential": True, "value": self.settings.client_id},
                                       sub={"essential": True}, exp={"essential": True})
        for refresh in (False, True):  # a key we do not know yet: the provider may have rotated its keys
            try:
                token = jwt.decode(id_token, KeySet.import_key_set(self._keys(refresh)),
                                   algorithms=["RS256", "ES256", "PS256", "EdDSA"])
                claims.validate(token.claims)
                return str(token.claims["sub"])
            except (InvalidKeyIdError, ValueError, KeyError):
                if refresh:
                    raise AuthError("the id token is not signed by a key of the OIDC provider", hint=hint) from None
            except JoseError as exc:
                raise AuthError(f"the id token is not valid: {exc.error}", hint=hint) from None
        raise AuthError("the id token is not valid", hint=hint)  # pragma: no cover - the loop returns or raises
