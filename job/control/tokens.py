"""Credentials for the control-plane server: personal API tokens, OIDC sessions and controller tokens.

A token reads ``dgr_<token id>_<secret>``: the id is public (lists and the audit log name it), the secret
is 256 random bits of which the registry keeps only the SHA-256 (a hash of a high-entropy secret cannot be
reversed or guessed, so no slow hash is needed). A token is shown once, when it is made.

Superusers make, list, expire and revoke every token; a team's admins make and revoke their clusters'
controller tokens; every user may revoke their own tokens (``daggers logout`` does).
:func:`authenticate` turns a presented token into a :class:`Principal`.

Lifetimes are bounded: every token expires at most :func:`max_lifetime_s` after it is made or its expiry is
set (366 days, ``$DAGGERS_MAX_TOKEN_DAYS``); a token made without a lifetime gets that maximum. A controller
token acts with the rights of whoever made it: it authenticates only while its maker is a superuser or an
admin of the cluster's team, so it stops working when its maker leaves the team or loses the admin role
(and works again if they get it back, until it expires; revoke it to end it for good).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from job.control.access import Access, check_name
from job.control.errors import AuthError, ControlError, NotFoundError
from job.control.models import ApiToken, Cluster, Membership, OidcIdentity, User, now
from job.control.registry import Registry

PREFIX = "dgr_"
KINDS = ("user", "oidc", "controller")
#: The longest lifetime of a token by default, in seconds (366 days).
MAX_TOKEN_LIFETIME_S = 366 * 86400.0
#: The variable that sets the longest lifetime of a token, in days.
ENV_MAX_DAYS = "DAGGERS_MAX_TOKEN_DAYS"


def max_lifetime_s() -> float:
    """Return the longest lifetime of a token, in seconds: ``$DAGGERS_MAX_TOKEN_DAYS`` days (at most ten
    years), else 366 days. Raises ControlError for a value that is not a number of days in that range."""
    raw = os.environ.get(ENV_MAX_DAYS, "").strip()
    if not raw:
        return MAX_TOKEN_LIFETIME_S
    try:
        days = float(raw)
    except ValueError:
        days = math.nan
    if not 0 < days <= 3660:  # also refuses NaN
        raise ControlError(f"${ENV_MAX_DAYS} {raw[:40]!r} is not a number of days between 0 and 3660")
    return days * 86400.0


def check_lifetime(field: str, seconds: float) -> float:
    """Return ``seconds`` when it is a finite, positive lifetime within :func:`max_lifetime_s`; raise
    ControlError naming ``field`` otherwise."""
    top = max_lifetime_s()
    if not math.isfinite(seconds) or not 0 < seconds <= top:
        raise ControlError(
            f"{field}: {seconds!r} is not a lifetime between 0 and {top:.0f} s ({top / 86400:g} days)",
            hint=f"the longest a token lives is ${ENV_MAX_DAYS} days",
        )
    return seconds


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _new_token() -> tuple[str, str, str]:
    """Return (token id, secret, the token as the user gets it)."""
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    return token_id, secret, f"{PREFIX}{token_id}_{secret}"


def split_token(token: str) -> tuple[str, str] | None:
    """Return (token id, secret) of a well-formed token, else None."""
    if not token.startswith(PREFIX):
        return None
    token_id, sep, secret = token[len(PREFIX) :].partition("_")
    if not sep or len(token_id) != 12 or not secret or len(token) > 200:
        return None
    return token_id, secret


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the user (None for a controller), the credential's label for the audit log
    (``token:<id>``, ``oidc:<subject>``, ``controller:<id>``), its kind and, for a controller, its cluster."""

    user: str | None
    credential: str
    kind: str
    token_id: str
    cluster: str | None = None


@dataclass(frozen=True)
class TokenView:
    """A token as lists show it (never its secret)."""

    token_id: str
    kind: str
    user: str | None
    cluster: str | None
    subject: str | None
    description: str
    created_by: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    last_used_at: float | None

    @classmethod
    def of(cls, t: ApiToken) -> TokenView:
        """Return the view of row ``t``."""
        return cls(
            token_id=t.token_id,
            kind=t.kind,
            user=t.user.name if t.user else None,
            cluster=t.cluster.name if t.cluster else None,
            subject=t.subject,
            description=t.description,
            created_by=t.created_by,
            created_at=t.created_at,
            expires_at=t.expires_at,
            revoked_at=t.revoked_at,
            last_used_at=t.last_used_at,
        )

    def active(self, at: float) -> bool:
        """Return whether the token still signs in at ``at``."""
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > at)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)


def credential_label(t: ApiToken) -> str:
    """Return how the audit log names token ``t``'s credential."""
    if t.kind == "oidc":
        return f"oidc:{t.subject}"
    return f"{'controller' if t.kind == 'controller' else 'token'}:{t.token_id}"


def authenticate(registry: Registry, token: str | None) -> Principal:
    """Return the principal of ``token``.

    Raises AuthError (one line, with the hint to sign in) when it is missing, malformed, unknown, wrong,
    expired or revoked; the message never repeats the token.
    """
    hint = "sign in with: daggers login --server URL"
    if not token:
        raise AuthError("this server needs a credential (Authorization: Bearer <token>)", hint=hint)
    parts = split_token(token)
    if parts is None:
        raise AuthError("the credential is not a Daggers token", hint=hint)
    token_id, secret = parts
    with registry.session() as s:
        row = s.scalar(select(ApiToken).where(ApiToken.token_id == token_id))
        if row is None or not hmac.compare_digest(row.secret_hash, _hash(secret)):
            raise AuthError(f"token {token_id} is not valid", hint=hint)
        t = now()
        if row.revoked_at is not None:
            raise AuthError(f"token {token_id} was revoked", hint=hint)
        if row.expires_at is not None and row.expires_at <= t:
            raise AuthError(f"token {token_id} has expired", hint=hint)
        if row.kind == "controller" and row.cluster is not None and not _maker_may(s, row):
            raise AuthError(
                f"token {token_id} was made by {row.created_by}, who is no longer an admin of team "
                f"{row.cluster.team.name}",
                hint=f"a team admin makes a new one: daggers token create --cluster {row.cluster.name}",
            )
        if row.last_used_at is None or t - row.last_used_at > 60:
            row.last_used_at = t  # coarse, so that a busy console does not write on every request
        return Principal(
            user=row.user.name if row.user else None,
            credential=credential_label(row),
            kind=row.kind,
            token_id=row.token_id,
            cluster=row.cluster.name if row.cluster else None,
        )


def _maker_may(s: Session, row: ApiToken) -> bool:
    """Return whether the maker of controller token ``row`` is still a superuser or an admin of its cluster's
    team (a controller token has its maker's rights, no more, no longer)."""
    maker = s.scalar(select(User).where(User.name == row.created_by))
    if maker is None:
        return False
    if maker.is_superuser:
        return True
    assert row.cluster is not None
    role = s.scalar(
        select(Membership.role).where(
            Membership.user_id == maker.id, Membership.team_id == row.cluster.team_id
        )
    )
    return role == "admin"


def issue_oidc_session(registry: Registry, issuer: str, subject: str, ttl_s: float) -> tuple[str, str]:
    """Return (user name, a new token) for a verified OIDC identity mapped to a user; the token expires after
    ``ttl_s``. Raises AuthError when no user has that identity."""
    with registry.session() as s:
        ident = s.scalar(
            select(OidcIdentity).where(OidcIdentity.issuer == issuer, OidcIdentity.subject == subject)
        )
        if ident is None:
            raise AuthError(
                f"no Daggers user has the OIDC identity {subject!r}",
                hint="a superuser links it: daggers user oidc USER --subject SUBJECT",
            )
        token_id, secret, token = _new_token()
        s.add(
            ApiToken(
                token_id=token_id,
                secret_hash=_hash(secret),
                kind="oidc",
                user_id=ident.user_id,
                subject=subject,
                description=f"OIDC sign-in ({issuer})",
                created_by=ident.user.name,
                expires_at=now() + ttl_s,
            )
        )
        return ident.user.name, token


class TokenOps(Access):
    """Making and managing tokens and OIDC identities, checked and audited."""

    def create_token(
        self,
        user: str | None = None,
        *,
        cluster: str | None = None,
        description: str = "",
        expires_in_s: float | None = None,
    ) -> tuple[TokenView, str]:
        """Make a personal token for ``user`` (superuser), or a controller token for ``cluster`` (superuser
        or the cluster team's admin); return its view and the token itself, which is never shown again.
        It expires after ``expires_in_s`` (default and at most :func:`max_lifetime_s`); a controller token
        authenticates only while its maker may still make it (see the module docstring).

        Raises ControlError for neither or both of user and cluster, or a lifetime that is not positive,
        finite and within the maximum; NotFoundError for an unknown user or cluster; PermissionDeniedError.
        """
        if (user is None) == (cluster is None):
            raise ControlError("a token is for a user or for a cluster's controller: give exactly one")
        lifetime = max_lifetime_s() if expires_in_s is None else check_lifetime("expires_in_s", expires_in_s)
        token_id, secret, token = _new_token()
        with self.registry.session() as s:
            row = ApiToken(
                token_id=token_id,
                secret_hash=_hash(secret),
                description=description,
                created_by=self.user,
                expires_at=now() + lifetime,
            )
            if user is not None:
                check_name("user", user)
                self._require_superuser(s, "create a token for", f"user {user}")
                u = s.scalar(select(User).where(User.name == user))
                if u is None:
                    raise NotFoundError(f"no user {user!r}")
                row.kind, row.user_id, target, team = "user", u.id, f"user {user}", None
            else:
                check_name("cluster", cluster or "")
                c = self._token_cluster(s, str(cluster))
                row.kind, row.cluster_id, target, team = "controller", c.id, f"cluster {cluster}", c.team.name
            s.add(row)
            self._audit(
                s,
                "create token",
                team,
                target,
                {"token_id": token_id, "kind": row.kind, "expires_at": row.expires_at},
            )
            s.flush()
            s.refresh(row)
            return TokenView.of(row), token

    def _token_cluster(self, s: Session, name: str) -> Cluster:
        c = s.scalar(select(Cluster).where(Cluster.name == name))
        visible = self._visible_teams(s)
        if c is None or (visible is not None and c.team_id not in visible):
            if c is not None:
                self._record_denied(
                    "manage controller tokens of", c.team.name, f"cluster {name}", "not a member of the team"
                )
            raise NotFoundError(f"no cluster {name!r} in your teams")
        self._require(s, c.team, "admin", "manage controller tokens of", f"cluster {name}")
        return c

    def tokens(self, user: str | None = None) -> list[TokenView]:
        """Return the tokens (superuser; of ``user`` only when given), oldest first."""
        with self.registry.session() as s:
            self._require_superuser(s, "list", "tokens")
            query = select(ApiToken).order_by(ApiToken.id)
            if user is not None:
                query = query.join(User, ApiToken.user_id == User.id).where(User.name == user)
            return [TokenView.of(t) for t in s.scalars(query)]

    def _token(self, s: Session, token_id: str, action: str) -> ApiToken:
        row = s.scalar(select(ApiToken).where(ApiToken.token_id == token_id))
        if row is not None and action == "revoke" and row.user is not None and row.user.name == self.user:
            return row  # anyone may revoke their own token
        if row is None:  # answered as another team's controller token is, so that neither is told apart
            if not self._is_superuser(s):
                self._record_denied(action, None, f"token {token_id}", "no such token")
            raise NotFoundError(f"no token {token_id!r}")
        if row.kind == "controller" and row.cluster is not None:
            visible = self._visible_teams(s)
            if visible is not None and row.cluster.team_id not in visible:
                self._record_denied(
                    action, row.cluster.team.name, f"token {token_id}", "not a member of the team"
                )
                raise NotFoundError(f"no token {token_id!r}")
            self._require(s, row.cluster.team, "admin", action, f"token {token_id}")
        else:
            self._require_superuser(s, action, f"token {token_id}")
        return row

    def revoke_token(self, token_id: str) -> TokenView:
        """Revoke a token at once (its own user; a superuser; a team admin for its clusters' controller
        tokens)."""
        with self.registry.session() as s:
            row = self._token(s, token_id, "revoke")
            row.revoked_at = row.revoked_at or now()
            self._audit(
                s, "revoke token", row.cluster.team.name if row.cluster else None, f"token {token_id}"
            )
            return TokenView.of(row)

    def expire_token(self, token_id: str, at: float | None = None) -> TokenView:
        """Make a token expire at ``at`` (default: now); superuser, or a team admin for controller tokens.

        Raises ControlError when ``at`` is not finite or later than :func:`max_lifetime_s` from now."""
        t, top = now(), max_lifetime_s()
        if at is not None and (not math.isfinite(at) or at - t > top):
            raise ControlError(
                f"at: {at!r} is not a time within {top / 86400:g} days from now",
                hint=f"the longest a token lives is ${ENV_MAX_DAYS} days",
            )
        with self.registry.session() as s:
            row = self._token(s, token_id, "expire")
            row.expires_at = t if at is None else at
            self._audit(
                s,
                "expire token",
                row.cluster.team.name if row.cluster else None,
                f"token {token_id}",
                {"expires_at": row.expires_at},
            )
            return TokenView.of(row)

    def link_oidc(self, user: str, issuer: str, subject: str) -> None:
        """Map OIDC identity (``issuer``, ``subject``) to ``user`` (superuser). Raises ConflictError when the
        identity is linked already."""
        from job.control.errors import ConflictError

        check_name("user", user)
        if not subject or len(subject) > 255 or not issuer.startswith(("http://", "https://")):
            raise ControlError(
                "an OIDC identity needs the issuer URL and a subject of at most 255 characters"
            )
        with self.registry.session() as s:
            self._require_superuser(s, "link an OIDC identity to", f"user {user}")
            u = s.scalar(select(User).where(User.name == user))
            if u is None:
                raise NotFoundError(f"no user {user!r}")
            if s.scalar(
                select(OidcIdentity).where(OidcIdentity.issuer == issuer, OidcIdentity.subject == subject)
            ):
                raise ConflictError(f"OIDC subject {subject!r} of {issuer} is linked already")
            s.add(OidcIdentity(issuer=issuer, subject=subject, user_id=u.id))
            self._audit(s, "link oidc", None, f"user {user}", {"issuer": issuer, "subject": subject})
