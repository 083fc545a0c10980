"""Signing in: the failed-sign-in limiter and the verification of OIDC id tokens."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, cast

from job.control.errors import AuthError
from job.server.settings import OidcSettings


class SigninLimiter:
    """Counts failed sign-ins per key (a source address, a presented token's id) over a sliding window.

    The server consults it only for a credential that did not authenticate: a valid credential is always
    served, so failures from one address (everyone behind one proxy) or with one token id can slow down
    only further failures, never lock out a valid token. The table holds at most ``max_keys`` keys; when it
    is full, the keys whose newest failure is oldest are forgotten first.
    """

    def __init__(
        self,
        max_failures: int,
        window_s: float,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str, at: float) -> deque[float]:
        q = self._failures.get(key) or deque()
        while q and q[0] <= at - self.window_s:
            q.popleft()
        return q

    def retry_after(self, keys: Iterable[str]) -> tuple[str, float] | None:
        """Return (the key, the seconds until it may fail again) of the first of ``keys`` over its limit, or
        None when none is."""
        at = self.clock()
        with self._lock:
            for key in keys:
                q = self._recent(key, at)
                if len(q) >= self.max_failures:
                    return key, max(q[0] + self.window_s - at, 0.1)
        return None

    def failed(self, keys: Iterable[str]) -> None:
        """Count one failed sign-in against each of ``keys``."""
        at = self.clock()
        with self._lock:
            for key in keys:
                q = self._recent(key, at)
                q.append(at)
                self._failures.pop(key, None)
                self._failures[key] = q  # the dict's order is by newest failure: the first ones are forgotten
            if len(self._failures) > self.max_keys:
                for key in [k for k in self._failures if not self._recent(k, at)]:
                    del self._failures[key]
                while len(self._failures) > self.max_keys:
                    del self._failures[next(iter(self._failures))]


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
                    raise AuthError(
                        f"the OIDC provider {self.settings.issuer} cannot be reached: {type(exc).__name__}"
                    ) from None
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

    def verify(self, id_token: str, *, may_refresh: bool = True) -> str:
        """Return the subject of a valid id token; raise AuthError (without the token) otherwise.

        ``may_refresh`` False: a key id the cached keys lack is refused without fetching the provider's keys
        again (for a source that has failed too often: its tokens cannot make the server fetch for it)."""
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError
        from joserfc.jwk import KeySet, KeySetSerialization

        hint = "sign in again: daggers login --server URL --oidc"
        claims = jwt.JWTClaimsRegistry(
            leeway=30,
            iss={"essential": True, "value": self.settings.issuer},
            aud={"essential": True, "value": self.settings.client_id},
            sub={"essential": True},
            exp={"essential": True},
        )
        for refresh in (
            (False, True) if may_refresh else (False,)
        ):  # an unknown key: the provider may have rotated
            try:
                keys = cast(
                    KeySetSerialization, self._keys(refresh)
                )  # the provider's JSON; import_key_set checks it
                token = jwt.decode(
                    id_token, KeySet.import_key_set(keys), algorithms=["RS256", "ES256", "PS256", "EdDSA"]
                )
                claims.validate(token.claims)
                return str(token.claims["sub"])
            except (InvalidKeyIdError, ValueError, KeyError):
                if refresh or not may_refresh:
                    raise AuthError(
                        "the id token is not signed by a key of the OIDC provider", hint=hint
                    ) from None
            except JoseError as exc:
                raise AuthError(f"the id token is not valid: {exc.error}", hint=hint) from None
        raise AuthError(
            "the id token is not valid", hint=hint
        )  # pragma: no cover - the loop returns or raises
