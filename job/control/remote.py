"""A control plane reached through ``daggers server``: the same methods as :class:`ControlPlane`.

The CLI and the console call a :class:`RemoteControlPlane` exactly as they call the embedded one; the
server decides who acts (the credential's user) and what they may do. Error answers become the same
Daggers errors (NotFoundError, PermissionDeniedError, ConflictError, AuthError...), so messages and exit
codes do not change. Uses ``requests`` (a core dependency): the client needs no server extra.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import requests

from job.control.errors import (
    AuthError,
    ConflictError,
    ControlError,
    NotFoundError,
    PermissionDeniedError,
    RegistryError,
    VersionConflictError,
)
from job.control.views import (
    AuditView,
    ClusterView,
    Compatibility,
    DaggerScreenView,
    DaggerView,
    EditResult,
    SampleView,
    Validation,
    VersionView,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from job.control.tokens import TokenView
    from job.output.model import Output, OutputQuery
    from job.query.preview import PreviewProgress

API = "/api/v1"
_T = TypeVar("_T")


def _shaped(value: object, kind: type[_T], what: str) -> _T:
    """Return ``value``, a server's JSON answer or a field of it, when it is a ``kind`` (dict, list, str);
    else a ControlError: what answered is not the daggers server this client speaks."""
    if not isinstance(value, kind):
        raise ControlError(f"the server answered {what} with a {type(value).__name__}, not a {kind.__name__}")
    return value


_ERRORS: dict[int, type[ControlError]] = {
    401: AuthError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    503: RegistryError,
}


def _dagger(d: dict[str, Any]) -> DaggerView:
    d = dict(d)
    d.pop("ref", None)
    return DaggerView(**d)


def _edit(r: dict[str, Any]) -> EditResult:
    return EditResult(**{**r, "compatibility": Compatibility(**r["compatibility"])})


def _seg(ref: str) -> str:
    team, _, name = ref.rpartition("/")
    return f"{quote(team or '-', safe='')}/{quote(name, safe='')}"


@contextmanager
def _ticking(on_progress: Callable[[PreviewProgress], None] | None) -> Iterator[None]:
    """Call ``on_progress`` with the time so far at once, every PROGRESS_EVERY_S while the block runs, and at
    its end (a preview that runs in the server)."""
    if on_progress is None:
        yield
        return
    from job.query.preview import PreviewProgress, ticking

    started = time.monotonic()

    def now(waiting: str) -> PreviewProgress:
        return PreviewProgress(time.monotonic() - started, waiting=waiting)

    with ticking(
        on_progress,
        lambda: now("running in the server"),
        now("running in the server"),
        lambda: now("done in the server"),
    ):
        yield


class RemoteControlPlane:
    """The operations of the server at ``url`` as the user of ``token``.

    ``verify`` is requests' TLS verification: True (the system's CAs), or the path of a CA bundle.
    """

    def __init__(self, url: str, token: str, *, verify: bool | str = True, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._verify = verify  # per request: requests lets $REQUESTS_CA_BUNDLE override a session's verify
        self._etag: str | None = None
        self._overview: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.user = ""
        self.credential: str | None = None
        #: Unused here: the server judges health at its own time (kept for the Plane protocol).
        self.clock: Callable[[], float] = time.time

    def __repr__(self) -> str:
        return f"RemoteControlPlane({self.url!r})"  # never the token

    # ---- HTTP ---------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        try:
            with self._lock:  # one session, used from the console's worker threads too
                r = self._session.request(
                    method,
                    self.url + API + path,
                    json=body,
                    timeout=self.timeout,
                    params={k: v for k, v in (params or {}).items() if v is not None},
                    headers=headers,
                    verify=self._verify,
                )
        except requests.exceptions.SSLError as exc:
            raise ControlError(
                f"TLS to {self.url} failed: {type(exc).__name__}",
                hint="give the server's CA with --ca or $DAGGERS_CA",
            ) from None
        except requests.RequestException as exc:
            raise ControlError(
                f"the server {self.url} cannot be reached: {type(exc).__name__}",
                hint="is `daggers server` running there?",
            ) from None
        if r.status_code >= 400:
            raise self._error(r)
        return r

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None, **params: Any) -> Any:
        return self._call(method, path, body, params).json()

    @staticmethod
    def _error(r: requests.Response) -> ControlError:
        try:
            e = r.json()["error"]
        except (ValueError, KeyError, TypeError):
            return ControlError(f"the server answered {r.status_code}: {r.text[:200]}")
        if r.status_code == 409 and "current_version" in e:
            return VersionConflictError(
                e["message"], current_version=e["current_version"], hint=e.get("hint")
            )
        err = _ERRORS.get(r.status_code, ControlError)(e["message"], hint=e.get("hint"))
        if err.__class__ is ControlError and e.get("title"):
            err.title = e["title"]
        return err

    # ---- identity, users, teams ---------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """Return the signed-in user, superuser flag and roles (and remember the user's name)."""
        me = _shaped(self._json("GET", "/whoami"), dict, "whoami")
        self.user, self.credential = me["user"], me.get("credential")
        return me

    def users(self) -> list[dict[str, Any]]:
        """Return the users you can see."""
        return _shaped(self._json("GET", "/users"), list, "the users")

    def add_user(self, name: str, *, superuser: bool = False) -> None:
        """Add a user (superusers)."""
        self._json("POST", "/users", {"name": name, "superuser": superuser})

    def link_oidc(self, user: str, issuer: str | None, subject: str) -> None:
        """Map an OIDC subject of the server's provider to ``user`` (``issuer`` is the server's)."""
        self._json("PUT", f"/users/{quote(user, safe='')}/oidc", {"subject": subject})

    def teams(self) -> list[dict[str, Any]]:
        """Return your teams and their members."""
        return _shaped(self._json("GET", "/teams"), list, "the teams")

    def add_team(self, name: str) -> None:
        """Add a team (superusers)."""
        self._json("POST", "/teams", {"name": name})

    def set_member(self, team: str, user: str, role: str) -> None:
        """Give ``user`` the ``role`` in ``team``."""
        self._json("PUT", f"/teams/{quote(team, safe='')}/members/{quote(user, safe='')}", {"role": role})

    def remove_member(self, team: str, user: str) -> None:
        """Remove ``user`` from ``team``."""
        self._json("DELETE", f"/teams/{quote(team, safe='')}/members/{quote(user, safe='')}")

    def role_in(self, team: str) -> str | None:
        """Return your role in ``team`` ("superuser", or None when not a member)."""
        role = self._json("GET", f"/teams/{quote(team, safe='')}/role")["role"]
        return None if role is None else _shaped(role, str, "the role")

    def can(self, team: str, need: str) -> bool:
        """Return whether you have at least ``need`` in ``team``."""
        from job.control.access import ROLE_RANK

        role = self.role_in(team)
        return role == "superuser" or (role is not None and ROLE_RANK[role] >= ROLE_RANK[need])

    def datacentres(self) -> list[dict[str, Any]]:
        """Return the data centres."""
        return _shaped(self._json("GET", "/datacentres"), list, "the data centres")

    def add_datacentre(self, name: str, description: str = "") -> None:
        """Add a data centre (superusers)."""
        self._json("POST", "/datacentres", {"name": name, "description": description})

    def audit(self, limit: int = 100, target: str | None = None) -> list[AuditView]:
        """Return the newest audit entries of your teams."""
        return [AuditView(**a) for a in self._json("GET", "/audit", limit=limit, target=target)]

    # ---- tokens ---------------------------------------------------------------------------------

    def create_token(
        self,
        user: str | None = None,
        *,
        cluster: str | None = None,
        description: str = "",
        expires_in_s: float | None = None,
    ) -> tuple[TokenView, str]:
        """Make a token; return its view and the token (shown once)."""
        from job.control.tokens import TokenView

        r = self._json(
            "POST",
            "/tokens",
            {"user": user, "cluster": cluster, "description": description, "expires_in_s": expires_in_s},
        )
        token = r.pop("token")
        return TokenView(**r), token

    def tokens(self, user: str | None = None) -> list[TokenView]:
        """Return every token (superusers)."""
        from job.control.tokens import TokenView

        return [TokenView(**t) for t in self._json("GET", "/tokens", user=user)]

    def revoke_token(self, token_id: str) -> TokenView:
        """Revoke a token now."""
        from job.control.tokens import TokenView

        return TokenView(**self._json("POST", f"/tokens/{quote(token_id, safe='')}/revoke"))

    def expire_token(self, token_id: str, at: float | None = None) -> TokenView:
        """Set when a token expires (default: now)."""
        from job.control.tokens import TokenView

        return TokenView(**self._json("POST", f"/tokens/{quote(token_id, safe='')}/expire", {"at": at}))

    # ---- clusters -------------------------------------------------------------------------------

    def clusters(self) -> list[ClusterView]:
        """Return your teams' clusters."""
        return [ClusterView(**c) for c in self._json("GET", "/clusters")]

    def cluster(self, name: str) -> ClusterView:
        """Return one cluster."""
        return ClusterView(**self._json("GET", f"/clusters/{quote(name, safe='')}"))

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
        """Add a cluster to a team."""
        return ClusterView(
            **self._json(
                "POST",
                "/clusters",
                {
                    "name": name,
                    "team": team,
                    "datacentre": datacentre,
                    "spark_master": spark_master,
                    "kafka_bootstrap": kafka_bootstrap,
                    "influx_url": influx_url,
                    "spark_ui_url": spark_ui_url,
                    "description": description,
                    "failover_to": failover_to,
                },
            )
        )

    def set_failover(self, cluster: str, failover_to: str | None) -> ClusterView:
        """Set the cluster that takes over this one's daggers."""
        return ClusterView(
            **self._json("PUT", f"/clusters/{quote(cluster, safe='')}/failover", {"failover_to": failover_to})
        )

    def cluster_health(self, cluster: str, *, live: bool = False) -> dict[str, Any]:
        """Return the cluster's health."""
        health = self._json("GET", f"/clusters/{quote(cluster, safe='')}/health", live=str(live).lower())
        return _shaped(health, dict, "the cluster's health")

    def cluster_topics(self, cluster: str) -> list[str]:
        """Return the topics on the cluster's brokers."""
        return _shaped(self._json("GET", f"/clusters/{quote(cluster, safe='')}/topics"), list, "the topics")

    # ---- daggers --------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """Return the console's screen data (clusters and daggers) with one request; unchanged data costs the
        server no JSON (If-None-Match)."""
        headers = {"If-None-Match": self._etag} if self._etag else None
        r = self._call("GET", "/screens/overview", headers=headers)
        if r.status_code == 304 and self._overview is not None:
            return self._overview
        self._etag, self._overview = r.headers.get("ETag"), r.json()
        return self._overview

    def daggers(self, cluster: str | None = None, search: str | None = None) -> list[DaggerView]:
        """Return your teams' daggers."""
        return [_dagger(d) for d in self._json("GET", "/daggers", cluster=cluster, search=search)]

    def dagger(self, ref: str) -> DaggerView:
        """Return one dagger."""
        return _dagger(self._json("GET", f"/daggers/{_seg(ref)}"))

    def dagger_screen(self, ref: str, samples: int = 120, audit: int = 50) -> DaggerScreenView:
        """Return the dagger, its samples, versions and audit entries with one request."""
        r = self._json("GET", f"/daggers/{_seg(ref)}/screen", samples=samples, audit=audit)
        return DaggerScreenView(
            dagger=_dagger(r["dagger"]),
            samples=[SampleView(**x) for x in r["samples"]],
            versions=[VersionView(**x) for x in r["versions"]],
            audit=[AuditView(**x) for x in r["audit"]],
        )

    def fusible_with(self, ref: str) -> tuple[str, list[str]]:
        """Return the dagger's isolation and the daggers it could be one query with."""
        r = self._json("GET", f"/daggers/{_seg(ref)}/fusible")
        return r["isolation"], r["fusible_with"]

    def samples(self, ref: str, limit: int = 120) -> list[SampleView]:
        """Return the dagger's last progress samples."""
        return [SampleView(**x) for x in self._json("GET", f"/daggers/{_seg(ref)}/samples", limit=limit)]

    def moves(self, ref: str) -> list[AuditView]:
        """Return the dagger's moves."""
        return [AuditView(**x) for x in self._json("GET", f"/daggers/{_seg(ref)}/moves")]

    def history(self, ref: str) -> list[VersionView]:
        """Return every spec version."""
        return [VersionView(**x) for x in self._json("GET", f"/daggers/{_seg(ref)}/versions")]

    def version(self, ref: str, number: int | None = None) -> VersionView:
        """Return a spec version (default: the current one)."""
        return VersionView(**self._json("GET", f"/daggers/{_seg(ref)}/versions/{number or 0}"))

    def diff(self, ref: str, a: int | None = None, b: int | None = None) -> str:
        """Return the diff between two spec versions."""
        return _shaped(self._json("GET", f"/daggers/{_seg(ref)}/diff", a=a, b=b)["diff"], str, "the diff")

    def output(self, ref: str, query: OutputQuery, sink: str | None = None) -> Output:
        """Return the dagger's own output read back from its sink, by the server (see ControlPlane.output)."""
        from job.output.model import Output, iso

        params: dict[str, Any] = {
            "field": query.field,
            "since_s": query.since_s,
            "step_s": query.step_s,
            "until": iso(query.until) if query.until else None,
            "tag": f"{query.tag[0]}={query.tag[1]}" if query.tag else None,
            "compare": ",".join(query.compare),
            "sink": sink,
        }
        return Output.from_dict(
            self._json(
                "GET",
                f"/daggers/{_seg(ref)}/output",
                **{k: v for k, v in params.items() if v not in (None, "")},
            )
        )

    def output_fields(self, ref: str, sink: str | None = None) -> list[str]:
        """Return the numeric fields the dagger's sink holds."""
        return list(self._json("GET", f"/daggers/{_seg(ref)}/output/fields", sink=sink or None)["fields"])

    def validate(self, cluster: str, text: str) -> Validation:
        """Check a spec for a cluster."""
        return Validation(**self._json("POST", "/validate", {"cluster": cluster, "spec": text}))

    def preview(
        self,
        ref: str,
        *,
        minutes: float = 5,
        limit: int = 100,
        spark: Any = None,
        on_progress: Callable[[PreviewProgress], None] | None = None,
    ) -> pa.Table:
        """Run the dagger's SQL over the last minutes of its topics, in the server (``on_progress`` hears the
        time it has taken so far: the server's Spark stages are not seen from here)."""
        with _ticking(on_progress):
            return _table(
                self._json("POST", f"/daggers/{_seg(ref)}/preview", {"minutes": minutes, "limit": limit})
            )

    def preview_text(
        self,
        cluster: str,
        text: str,
        *,
        minutes: float = 5,
        limit: int = 100,
        spark: Any = None,
        on_progress: Callable[[PreviewProgress], None] | None = None,
    ) -> pa.Table:
        """Preview a spec that is not a dagger yet, in the server (``on_progress`` as :meth:`preview`)."""
        with _ticking(on_progress):
            return _table(
                self._json(
                    "POST", "/preview", {"cluster": cluster, "spec": text, "minutes": minutes, "limit": limit}
                )
            )

    def create(self, cluster: str, text: str, *, deploy: bool = False, comment: str = "") -> DaggerView:
        """Create a dagger (version 1)."""
        return _dagger(
            self._json(
                "POST", "/daggers", {"cluster": cluster, "spec": text, "deploy": deploy, "comment": comment}
            )
        )

    def deploy(self, ref: str) -> DaggerView:
        """Ask the controller to run the dagger."""
        return _dagger(self._json("POST", f"/daggers/{_seg(ref)}/deploy"))

    def stop(self, ref: str) -> DaggerView:
        """Ask the controller to stop the dagger."""
        return _dagger(self._json("POST", f"/daggers/{_seg(ref)}/stop"))

    def restart(self, ref: str) -> DaggerView:
        """Ask the controller to restart the dagger."""
        return _dagger(self._json("POST", f"/daggers/{_seg(ref)}/restart"))

    def delete(self, ref: str) -> DaggerView:
        """Delete the dagger."""
        return _dagger(self._json("DELETE", f"/daggers/{_seg(ref)}"))

    def move(self, ref: str, cluster: str, *, reason: str | None = None) -> DaggerView:
        """Move the dagger to another cluster of its team."""
        return _dagger(
            self._json("POST", f"/daggers/{_seg(ref)}/move", {"cluster": cluster, "reason": reason})
        )

    def check_edit(self, ref: str, text: str) -> Compatibility:
        """Return whether ``text`` could resume from the dagger's checkpoint."""
        return Compatibility(**self._json("POST", f"/daggers/{_seg(ref)}/check-edit", {"spec": text}))

    def edit(
        self,
        ref: str,
        text: str,
        *,
        expected_version: int | None = None,
        allow_fresh_start: bool = False,
        comment: str = "",
        action: str = "edit",
    ) -> EditResult:
        """Make ``text`` the next version, from ``expected_version`` (default: the current one as read now)."""
        if expected_version is None:
            expected_version = self.dagger(ref).current_version
        return _edit(
            self._json(
                "PUT",
                f"/daggers/{_seg(ref)}/spec",
                {
                    "spec": text,
                    "expected_version": expected_version,
                    "allow_fresh_start": allow_fresh_start,
                    "comment": comment,
                },
            )
        )

    def rollback(self, ref: str, to_version: int, *, allow_fresh_start: bool = False) -> EditResult:
        """Make an earlier version's spec the next version."""
        return _edit(
            self._json(
                "POST",
                f"/daggers/{_seg(ref)}/rollback",
                {"to_version": to_version, "allow_fresh_start": allow_fresh_start},
            )
        )

    def publish_to_kafka(
        self,
        ref: str,
        topic: str,
        *,
        bootstrap_servers: str | None = None,
        fmt: str = "json",
        proto_class: str | None = None,
    ) -> EditResult:
        """Add a Kafka sink (a new version)."""
        return _edit(
            self._json(
                "POST",
                f"/daggers/{_seg(ref)}/publish",
                {
                    "topic": topic,
                    "bootstrap_servers": bootstrap_servers,
                    "format": fmt,
                    "proto_class": proto_class,
                },
            )
        )


def _table(r: dict[str, Any]) -> pa.Table:
    import pyarrow as pa

    rows = r["rows"]
    if not rows:
        return pa.table({c: pa.array([], pa.string()) for c in r["columns"]})
    return pa.Table.from_pylist(json.loads(json.dumps(rows)))


_log = logging.getLogger(__name__)
#: How an older server refuses a field it does not know: a status or sample field (its agent), a body's field
#: (its request validation).
_REFUSED = (
    (re.compile(r"^not (status|sample) fields: ([\w, ]+)$"), None),
    (re.compile(r"^(\w+): Extra inputs are not permitted"), "body"),
)


class RemoteClusterAgent:
    """A cluster controller's registry operations through the server, with the cluster's controller token:
    the methods of :class:`job.control.agent.ClusterAgent`.

    A server older than the controller may refuse a field it does not know (a status field added since, such
    as ``lag_error_at``): the controller then leaves that field out of what it sends that server, says so
    once, and sends again; the rest of its round is recorded."""

    def __init__(self, url: str, token: str, cluster: str, *, verify: bool | str = True) -> None:
        self._http = RemoteControlPlane(url, token, verify=verify, timeout=30.0)
        self.cluster = cluster
        self.where = url.rstrip("/")
        self._base = f"/controller/{quote(cluster, safe='')}"
        #: The fields this server refused, by kind (status, sample, body): never sent to it again.
        self.refused: dict[str, set[str]] = {"status": set(), "sample": set(), "body": set()}

    def _without_refused(self, body: dict[str, Any]) -> dict[str, Any]:
        """Return ``body`` without the fields this server refused."""
        out = {k: v for k, v in body.items() if k not in self.refused["body"]}
        if isinstance(out.get("updates"), dict):
            out["updates"] = {
                i: {k: v for k, v in upd.items() if k not in self.refused["status"]}
                for i, upd in out["updates"].items()
            }
        if isinstance(out.get("samples"), list):
            out["samples"] = [
                {k: v for k, v in x.items() if k not in self.refused["sample"]} for x in out["samples"]
            ]
        return out

    def _learn(self, exc: ControlError) -> bool:
        """Return True when ``exc`` is an older server refusing fields it does not know (remembered, and said
        once), False for any other error."""
        for pattern, kind in _REFUSED:
            m = pattern.match(exc.message) if type(exc) is ControlError else None
            if m is None:
                continue
            what = kind or m[1]
            names = {n.strip() for n in (m[1] if kind else m[2]).split(",") if n.strip()}
            if not names or names <= self.refused[what]:
                return False
            self.refused[what] |= names
            _log.warning(
                "the server %s does not know the %s field%s %s (an older version): not sent to it",
                self.where,
                what,
                "s" if len(names) > 1 else "",
                ", ".join(sorted(names)),
            )
            return True
        return False

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``path`` under the cluster, leaving out the fields the server refused (see the class
        docstring)."""
        while True:
            try:
                return self._http._json("POST", f"{self._base}/{path}", self._without_refused(body))
            except ControlError as exc:
                if not self._learn(exc):
                    raise

    def settings(self) -> dict[str, Any]:
        """Return the cluster's addresses."""
        return _shaped(self._http._json("GET", f"{self._base}/settings"), dict, "the settings")

    def holder(self) -> tuple[str | None, int | None]:
        """Return the recorded controller (host, pid)."""
        r = self._http._json("GET", f"{self._base}/holder")
        return r["host"], r["pid"]

    def claim(self, host: str, pid: int, stale_s: float, gone: bool, metrics_url: str | None = None) -> None:
        """Record (host, pid) as the controller; ConflictError when another one is alive."""
        self._post(
            "claim", {"host": host, "pid": pid, "stale_s": stale_s, "gone": gone, "metrics_url": metrics_url}
        )

    def release(self, host: str, pid: int) -> None:
        """Clear the heartbeat when (host, pid) is still the controller."""
        self._http._json("POST", f"{self._base}/release", {"host": host, "pid": pid})

    def fail_over(self, after_s: float | None = None) -> list[str]:
        """Take over silent clusters' daggers (silent by the server's clock, for at least the server's wait);
        return the refs moved."""
        moved = self._http._json("POST", f"{self._base}/failover", {"after_s": after_s})["moved"]
        return _shaped(moved, list, "the fail-over")

    def assignments(self) -> list[dict[str, Any]]:
        """Return the cluster's daggers with their specs and status."""
        return _shaped(self._http._json("GET", f"{self._base}/assignments"), list, "the assignments")

    def report(
        self,
        updates: dict[int, dict[str, Any]],
        samples: list[dict[str, Any]],
        health: dict[str, Any] | None,
        handed: list[int],
        host: str,
        pid: int,
        prune_before: float | None = None,
        metrics_url: str | None = None,
    ) -> None:
        """Write one round (the heartbeat is the server's time)."""
        self._post(
            "report",
            {
                "updates": {str(k): v for k, v in updates.items()},
                "samples": samples,
                "health": health,
                "handed": handed,
                "host": host,
                "pid": pid,
                "prune_before": prune_before,
                "metrics_url": metrics_url,
            },
        )
