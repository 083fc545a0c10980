"""Who may do what, enforced in the control plane itself (the CLI and the console only call it).

A user acts on a team's clusters and daggers through a membership role:

* ``viewer``: see the team's clusters, daggers, versions, health, audit trail; preview;
* ``editor``: also create, deploy, edit, stop, restart, roll back and publish daggers;
* ``admin``: also delete daggers, add clusters to the team and manage its members.

A superuser manages users, teams and data centres and may act in every team. A user sees nothing
of teams they are not in: another team's dagger is "not found", and the refused attempt is
recorded in the audit log like every change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from job.common.names import REGISTRY_NAME_RE, REGISTRY_NAME_RULE, is_name
from job.control.errors import ControlError, NotFoundError, PermissionDeniedError
from job.control.health_model import HealthSettings
from job.control.models import AuditEntry, Membership, Team, User, now
from job.control.registry import Registry

ROLE_RANK = {"viewer": 1, "editor": 2, "admin": 3}


def check_name(kind: str, name: str) -> str:
    """Return ``name`` if it is 1-63 lower-case letters, digits, ``.``, ``_`` or ``-`` starting with a
    letter, as a whole (``"ops\\n"`` is refused); raise ControlError naming ``kind`` otherwise."""
    if not is_name(name, REGISTRY_NAME_RE):
        raise ControlError(f"{kind} name {name!r} must be {REGISTRY_NAME_RULE}")
    return name


def check_role(role: str) -> str:
    """Return ``role`` if it is viewer, editor or admin; raise ControlError otherwise."""
    if role not in ROLE_RANK:
        raise ControlError(f"role {role!r} is not one of viewer, editor, admin")
    return role


def _embedded_identity() -> tuple[str, str]:
    """Return the audit log's credential and source of an embedded plane: ``embedded:<OS user>`` and
    ``local <host> pid <pid>`` (who opened the registry directly, not through a server)."""
    import getpass
    import os
    import socket

    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container)
        who = f"uid {os.getuid()}"
    return f"embedded:{who}"[:255], f"local {socket.gethostname()} pid {os.getpid()}"[:255]


class Access:
    """The acting user's rights over one registry; the base of :class:`~job.control.api.ControlPlane`."""

    def __init__(
        self,
        registry: Registry,
        user: str,
        *,
        credential: str | None = None,
        source: str | None = None,
        per_request: bool = False,
        serves_clients: bool = False,
        health_settings: HealthSettings | None = None,
    ) -> None:
        """Act as ``user``; ``credential`` (``token:<id>``, ``oidc:<subject>``) and ``source`` (the client's
        address) are what the server authenticated, recorded with every audit entry. ``per_request``: the
        plane serves one request (the server's), so the user's flag and roles are read once, not per check.
        ``health_settings``: the thresholds of the health model every view is judged by (default: from the
        environment). ``serves_clients``: the plane runs in a server for its clients, so a spec is data
        to it: it previews and reads output only on the cluster's own brokers and InfluxDB, resolving no
        variable of its environment (:func:`job.control.spec_check.served_spec`)."""
        self.registry = registry
        self.user = user
        if credential is None and source is None:  # embedded: the OS user on this host opened the registry
            credential, source = _embedded_identity()
        self.credential = credential
        self.source = source
        self._per_request = per_request
        self.serves_clients = serves_clients
        self._identity: tuple[bool, dict[int, str]] | None = None
        #: The thresholds of the health model every view of a dagger or cluster is judged by.
        self.health_settings = health_settings or HealthSettings.from_env()
        #: The time health is judged at (a console with a pinned clock sets its own).
        self.clock: Callable[[], float] = now

    # ---- identity -----------------------------------------------------------------------------

    def _me(self, s: Session) -> User:
        me = s.scalar(select(User).where(User.name == self.user))
        if me is None:
            raise NotFoundError(
                f"unknown user {self.user!r} in the registry",
                hint="an admin adds users with: daggers user add NAME",
            )
        return me

    def _who(self, s: Session) -> tuple[bool, dict[int, str]]:
        """Return the acting user's superuser flag and role by team id (read once for a per-request plane)."""
        if self._identity is not None:
            return self._identity
        me = self._me(s)
        rows = s.execute(select(Membership.team_id, Membership.role).where(Membership.user_id == me.id))
        identity = (bool(me.is_superuser), {team_id: role for team_id, role in rows})
        if self._per_request:
            self._identity = identity
        return identity

    def _roles(self, s: Session) -> dict[int, str]:
        """Return the acting user's role by team id."""
        return dict(self._who(s)[1])

    def _is_superuser(self, s: Session) -> bool:
        return self._who(s)[0]

    def _visible_teams(self, s: Session) -> set[int] | None:
        """Return the ids of the teams the user may see, or None for all (a superuser)."""
        if self._is_superuser(s):
            return None
        return set(self._roles(s))

    def _allowed(self, s: Session, team_id: int, need: str) -> bool:
        if self._is_superuser(s):
            return True
        role = self._roles(s).get(team_id)
        return role is not None and ROLE_RANK[role] >= ROLE_RANK[need]

    def _require(self, s: Session, team: Team, need: str, action: str, target: str) -> None:
        """Raise PermissionDeniedError (and record the refusal) unless the user has ``need`` in ``team``."""
        if self._allowed(s, team.id, need):
            return
        role = self._roles(s).get(team.id)
        self._record_denied(action, team.name, target, f"needs {need}, has {role or 'no role'}")
        raise PermissionDeniedError(
            f"{self.user} cannot {action} {target}: it needs the {need} role in team "
            f"{team.name!r} (you have {role or 'none'})"
        )

    def _require_superuser(self, s: Session, action: str, target: str) -> None:
        if not self._is_superuser(s):
            self._record_denied(action, None, target, "needs superuser")
            raise PermissionDeniedError(f"{self.user} cannot {action} {target}: only a superuser can")

    # ---- audit --------------------------------------------------------------------------------

    def _audit(
        self, s: Session, action: str, team: str | None, target: str, details: dict[str, Any] | None = None
    ) -> None:
        """Record a change in the operation's own transaction (so it is kept exactly when the change is)."""
        s.add(
            AuditEntry(
                user=self.user,
                action=action,
                team=team,
                target=target,
                allowed=True,
                details=details or {},
                credential=self.credential,
                source=self.source,
            )
        )

    def _record_denied(self, action: str, team: str | None, target: str, why: str) -> None:
        """Record a refused attempt in a transaction of its own (the operation itself is rolled back)."""
        with self.registry.session() as s:
            s.add(
                AuditEntry(
                    user=self.user,
                    action=action,
                    team=team,
                    target=target,
                    allowed=False,
                    details={"reason": why},
                    credential=self.credential,
                    source=self.source,
                )
            )
