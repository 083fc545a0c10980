"""Users, teams, memberships, data centres and clusters (the slow-changing part of the registry)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from job.check.secrets import check_clear_secrets
from job.control.access import ROLE_RANK, Access, check_name, check_role
from job.control.errors import ConflictError, ControlError, NotFoundError
from job.control.health_model import is_live
from job.control.models import Cluster, Dagger, DataCentre, Membership, Team, User
from job.control.registry import Registry
from job.control.views import ClusterView, cluster_verdict, judged


def bootstrap_admin(registry: Registry, name: str) -> None:
    """Create the first user, a superuser, in an empty registry.

    Raises ConflictError when the registry already has users (ask a superuser then).
    """
    check_name("user", name)
    with registry.session() as s:
        if s.scalar(select(func.count()).select_from(User)):
            raise ConflictError(
                "the registry already has users; a superuser adds more with: daggers user add"
            )
        s.add(User(name=name, is_superuser=True))
        from job.control.models import AuditEntry

        s.add(AuditEntry(user=name, action="bootstrap", target=f"user {name}", details={"superuser": True}))


#: A cluster's addresses reach its daggers as DAGGERS_BOOTSTRAP and DAGGERS_INFLUX, as they are.
CLUSTER_SECRET_HINT = (
    "give the cluster's addresses without credentials; a dagger's spec names them as "
    "${VARIABLE}s (a sink's username and password, a stream's consumer_config), set where "
    "the cluster's controller runs"
)


def _validate_master(master: str) -> str:
    if master.startswith("local") or master.startswith("spark://"):
        return master
    raise ControlError(f"spark master {master!r} must be local, local[N], local[*] or spark://host:port")


def _validate_bootstrap(bootstrap: str) -> str:
    for part in bootstrap.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ControlError(f"kafka bootstrap {part.strip()!r} is not host:port")
    return bootstrap


def _validate_url(what: str, url: str) -> str:
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ControlError(f"{what} {url!r} must be an http:// or https:// URL")
    return url.rstrip("/")


class AdminOps(Access):
    """Registry administration, each call checked against the acting user's rights and audited."""

    # ---- lookups ------------------------------------------------------------------------------

    def _my_team(self, s: Session, name: str, need: str, action: str) -> Team:
        """Return team ``name`` if the user has ``need`` in it. A team the user is not in answers as an unknown
        one does (NotFoundError, "no team"; the attempt is recorded): its name is not confirmed to them."""
        team = s.scalar(select(Team).where(Team.name == name))
        visible = self._visible_teams(s)
        if team is None or (visible is not None and team.id not in visible):
            if team is not None:
                self._record_denied(action, team.name, f"team {name}", "not a member of the team")
            raise NotFoundError(f"no team {name!r}")
        self._require(s, team, need, action, f"team {name}")
        return team

    def _user(self, s: Session, name: str) -> User:
        user = s.scalar(select(User).where(User.name == name))
        if user is None:
            raise NotFoundError(f"no user {name!r}")
        return user

    def _cluster(self, s: Session, name: str, need: str = "viewer", action: str = "see") -> Cluster:
        cluster = s.scalar(select(Cluster).where(Cluster.name == name))
        visible = self._visible_teams(s)
        if cluster is None or (visible is not None and cluster.team_id not in visible):
            if cluster is not None:
                self._record_denied(action, cluster.team.name, f"cluster {name}", "not a member of the team")
            raise NotFoundError(f"no cluster {name!r} in your teams")
        self._require(s, cluster.team, need, action, f"cluster {name}")
        return cluster

    # ---- who am I -----------------------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """Return the acting user: name, superuser flag and role per team."""
        with self.registry.session() as s:
            me = self._me(s)
            teams = {
                m.team.name: m.role for m in s.scalars(select(Membership).where(Membership.user_id == me.id))
            }
            return {"user": me.name, "superuser": me.is_superuser, "teams": teams}

    # ---- users and teams ----------------------------------------------------------------------

    def add_user(self, name: str, *, superuser: bool = False) -> None:
        """Add a user (superuser only). Raises ConflictError when the name is taken."""
        check_name("user", name)
        with self.registry.session() as s:
            self._require_superuser(s, "add user", name)
            if s.scalar(select(User).where(User.name == name)) is not None:
                raise ConflictError(f"user {name!r} exists")
            s.add(User(name=name, is_superuser=superuser))
            self._audit(s, "add user", None, f"user {name}", {"superuser": superuser})

    def users(self) -> list[dict[str, Any]]:
        """Return the users with their roles; a superuser sees all, others the members of their teams."""
        with self.registry.session() as s:
            visible = self._visible_teams(s)
            out = []
            for user in s.scalars(select(User).order_by(User.name)):
                roles = {
                    m.team.name: m.role
                    for m in s.scalars(select(Membership).where(Membership.user_id == user.id))
                    if visible is None or m.team_id in visible
                }
                if visible is None or roles or user.name == self.user:
                    out.append({"user": user.name, "superuser": user.is_superuser, "teams": roles})
            return out

    def add_team(self, name: str) -> None:
        """Add a team (superuser only). Raises ConflictError when the name is taken."""
        check_name("team", name)
        with self.registry.session() as s:
            self._require_superuser(s, "add team", name)
            if s.scalar(select(Team).where(Team.name == name)) is not None:
                raise ConflictError(f"team {name!r} exists")
            s.add(Team(name=name))
            self._audit(s, "add team", name, f"team {name}")

    def teams(self) -> list[dict[str, Any]]:
        """Return the teams the user is in (all for a superuser) with their members."""
        with self.registry.session() as s:
            visible = self._visible_teams(s)
            out = []
            for team in s.scalars(select(Team).order_by(Team.name)):
                if visible is not None and team.id not in visible:
                    continue
                members = {
                    m.user.name: m.role
                    for m in s.scalars(select(Membership).where(Membership.team_id == team.id))
                }
                out.append({"team": team.name, "members": members})
            return out

    def set_member(self, team: str, user: str, role: str) -> None:
        """Give ``user`` the ``role`` in ``team`` (superuser or the team's admin)."""
        check_role(role)
        with self.registry.session() as s:
            t = self._my_team(s, team, "admin", "manage members of")
            u = self._user(s, user)
            m = s.scalar(select(Membership).where(Membership.user_id == u.id, Membership.team_id == t.id))
            before = m.role if m else None
            if m is None:
                s.add(Membership(user_id=u.id, team_id=t.id, role=role))
            else:
                m.role = role
            self._audit(s, "set member", team, f"user {user}", {"role": role, "before": before})

    def remove_member(self, team: str, user: str) -> None:
        """Remove ``user`` from ``team`` (superuser or the team's admin)."""
        with self.registry.session() as s:
            t = self._my_team(s, team, "admin", "manage members of")
            u = self._user(s, user)
            m = s.scalar(select(Membership).where(Membership.user_id == u.id, Membership.team_id == t.id))
            if m is None:
                raise NotFoundError(f"{user} is not a member of {team}")
            s.delete(m)
            self._audit(s, "remove member", team, f"user {user}", {"role": m.role})

    # ---- data centres and clusters ------------------------------------------------------------

    def add_datacentre(self, name: str, description: str = "") -> None:
        """Add a data centre (superuser only)."""
        check_name("data centre", name)
        with self.registry.session() as s:
            self._require_superuser(s, "add data centre", name)
            if s.scalar(select(DataCentre).where(DataCentre.name == name)) is not None:
                raise ConflictError(f"data centre {name!r} exists")
            s.add(DataCentre(name=name, description=description))
            self._audit(s, "add data centre", None, f"datacentre {name}")

    def datacentres(self) -> list[dict[str, Any]]:
        """Return every data centre (names are not secret)."""
        with self.registry.session() as s:
            return [
                {"name": d.name, "description": d.description}
                for d in s.scalars(select(DataCentre).order_by(DataCentre.name))
            ]

    def add_cluster(
        self,
        name: str,
        *,
        team: str,
        datacentre: str,
        spark_master: str,
        kafka_bootstrap: str,
        influx_url: str,
        spark_ui_url: str | None = None,
        description: str = "",
        failover_to: str | None = None,
    ) -> ClusterView:
        """Add a cluster to ``team`` in ``datacentre`` (superuser or the team's admin); return it.

        ``failover_to`` names a cluster of the same team that takes over its running daggers when its
        controller is gone (see :meth:`set_failover`). Raises ControlError naming a field that holds a
        credential (the registry, the audit log and the controllers' assignments hold none)."""
        check_name("cluster", name)
        check_clear_secrets(
            {
                "spark_master": spark_master,
                "kafka_bootstrap": kafka_bootstrap,
                "influx_url": influx_url,
                "spark_ui_url": spark_ui_url,
                "description": description,
            },
            "cluster",
            error=ControlError,
            hint=CLUSTER_SECRET_HINT,
        )
        _validate_master(spark_master)
        _validate_bootstrap(kafka_bootstrap)
        influx_url = _validate_url("influx url", influx_url)
        spark_ui_url = _validate_url("spark ui url", spark_ui_url) if spark_ui_url else None
        with self.registry.session() as s:
            t = self._my_team(s, team, "admin", "add a cluster to")
            dc = s.scalar(select(DataCentre).where(DataCentre.name == datacentre))
            if dc is None:
                raise NotFoundError(f"no data centre {datacentre!r}")
            if s.scalar(select(Cluster).where(Cluster.name == name)) is not None:
                # names are unique across teams (controllers and the API name a cluster alone): the same
                # answer whoever has it, so that it does not say that another team has such a cluster
                raise ConflictError(
                    f"cluster name {name!r} is not available",
                    hint="cluster names are unique across all teams: choose another",
                )
            backup = self._failover_target(s, t, failover_to) if failover_to else None
            c = Cluster(
                name=name,
                team=t,
                datacentre=dc,
                spark_master=spark_master,
                spark_ui_url=spark_ui_url,
                kafka_bootstrap=kafka_bootstrap,
                influx_url=influx_url,
                description=description,
                failover_to_id=backup.id if backup else None,
            )
            s.add(c)
            self._audit(
                s,
                "add cluster",
                team,
                f"cluster {name}",
                {
                    "datacentre": datacentre,
                    "spark_master": spark_master,
                    "kafka_bootstrap": kafka_bootstrap,
                    "influx_url": influx_url,
                    "failover_to": failover_to,
                },
            )
            s.flush()
            s.refresh(c)
            return ClusterView.of(c)

    def _failover_target(self, s: Session, team: Team, name: str) -> Cluster:
        target = self._cluster(s, name)
        if target.team_id != team.id:
            raise ControlError(
                f"cluster {name} belongs to team {target.team.name}, not to {team.name}: a cluster "
                "fails over only to a cluster of its own team"
            )
        return target

    def set_failover(self, cluster: str, failover_to: str | None) -> ClusterView:
        """Make ``failover_to`` (a cluster of the same team; None: no failover) take over ``cluster``'s
        running daggers when ``cluster``'s controller heartbeat is stale for the failover controller's
        ``failover_after_s`` (the team's admin). Their checkpoints must be on storage both reach."""
        with self.registry.session() as s:
            c = self._cluster(s, cluster, "admin", "set the failover of")
            before = c.failover_to.name if c.failover_to is not None else None
            target = self._failover_target(s, c.team, failover_to) if failover_to else None
            if target is not None and target.id == c.id:
                raise ControlError(f"cluster {cluster} cannot fail over to itself")
            c.failover_to_id = target.id if target is not None else None
            self._audit(
                s,
                "set failover",
                c.team.name,
                f"cluster {cluster}",
                {"failover_to": failover_to, "before": before},
            )
        return self.cluster(cluster)

    def clusters(self) -> list[ClusterView]:
        """Return the clusters of the user's teams (all for a superuser), by data centre then name."""
        with self.registry.session() as s:
            visible = self._visible_teams(s)
            rows = s.scalars(select(Cluster).join(DataCentre).order_by(DataCentre.name, Cluster.name))
            counts = dict(
                s.execute(
                    select(Dagger.cluster_id, func.count())
                    .where(Dagger.tombstone == 0)
                    .group_by(Dagger.cluster_id)
                ).all()
            )
            shown = [c for c in rows if visible is None or c.team_id in visible]
            at = self.clock()
            daggers = list(
                s.scalars(
                    select(Dagger).where(Dagger.tombstone == 0, Dagger.cluster_id.in_([c.id for c in shown]))
                )
            )
            states: dict[int, list[str]] = {c.id: [] for c in shown}
            for d, view in zip(daggers, judged(s, daggers, self.health_settings, at), strict=True):
                states[d.cluster_id].append(view.state)
            # running as the health model judges it: an unknown dagger (a silent controller) is not
            running = {cid: sum(1 for state in got if is_live(state)) for cid, got in states.items()}
            return [
                ClusterView.of(
                    c,
                    counts.get(c.id, 0),
                    running.get(c.id, 0),
                    cluster_verdict(c, states[c.id], self.health_settings, at),
                )
                for c in shown
            ]

    def cluster(self, name: str) -> ClusterView:
        """Return one cluster; raise NotFoundError unless the user is in its team."""
        return next((c for c in self.clusters() if c.name == name), None) or self._missing_cluster(name)

    def _missing_cluster(self, name: str) -> ClusterView:
        with self.registry.session() as s:
            self._cluster(s, name)  # records the refusal and raises
        raise NotFoundError(f"no cluster {name!r} in your teams")  # pragma: no cover - _cluster raised

    def role_in(self, team: str) -> str | None:
        """Return the user's role in ``team`` ("superuser" for a superuser, None when not a member)."""
        with self.registry.session() as s:
            if self._is_superuser(s):
                return "superuser"
            t = s.scalar(select(Team).where(Team.name == team))
            return self._roles(s).get(t.id) if t else None

    def can(self, team: str, need: str) -> bool:
        """Return whether the user has at least the ``need`` role in ``team`` (for a UI to grey out actions)."""
        role = self.role_in(team)
        return role == "superuser" or (role is not None and ROLE_RANK[role] >= ROLE_RANK[need])
