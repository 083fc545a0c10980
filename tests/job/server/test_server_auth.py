"""The server on a real PostgreSQL registry, over real HTTP: sign-in, roles, teams, controllers, bad input,
optimistic concurrency, secrets. The table-driven test enumerates the server's own routes (its OpenAPI),
so a new endpoint without a row in ENDPOINTS fails it."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import func, select, text

from job.control.models import AuditEntry, Base
from job.control.registry import Registry
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import World, running_server, seed_tokens

pytestmark = pytest.mark.integration

ROLE_OF = {"root": "superuser", "adam": "admin", "alice": "editor", "vera": "viewer", "bob": None}
RANK = {"viewer": 1, "editor": 2, "admin": 3}
_counter = itertools.count(1)


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root, tokens = seed_tokens(registry)
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(
        url,
        log,
        "--max-failed-signins",
        "1000",
        "--oidc-issuer",
        "http://127.0.0.1:9/idp",
        "--oidc-client-id",
        "daggers",
    ) as base:
        yield World(base, registry, root, tokens, log, secrets=list(tokens.values()))
    registry.close()


def call(
    world: World, who: str | None, method: str, path: str, body: Any = None, **kw: Any
) -> requests.Response:
    headers = {**world.headers(who), **kw.pop("headers", {})}
    return requests.request(method, world.api(path), headers=headers, json=body, timeout=120, **kw)


def _fingerprint_sql() -> str:
    """The one PostgreSQL query of :func:`fingerprint`: per table but the audit log, the MD5 of its rows as
    text (every column but tokens' last use), in a fixed order."""
    parts = []
    for table in Base.metadata.sorted_tables:
        if table.name == "audit_log":
            continue
        row = "ROW(" + ", ".join(f'"{c.name}"' for c in table.columns if c.name != "last_used_at") + ")::text"
        parts.append(
            f"SELECT '{table.name}', md5(coalesce(string_agg({row}, '|' ORDER BY {row}), '')) FROM {table.name}"
        )
    return " UNION ALL ".join(parts)


FINGERPRINT_SQL = _fingerprint_sql()


def fingerprint(registry: Registry) -> str:
    """Return a digest of every registry table but the audit log (and tokens' last use): one query, the rows
    hashed in the database (the table runs it twice per refused call)."""
    with registry.engine.connect() as conn:
        digests = conn.execute(text(FINGERPRINT_SQL)).all()
    return hashlib.sha256(repr(sorted(digests)).encode()).hexdigest()


def refusals(registry: Registry) -> int:
    with registry.session() as s:
        return s.scalar(select(func.count(AuditEntry.id)).where(AuditEntry.allowed.is_(False))) or 0


# ---- sign-in -------------------------------------------------------------------------------------


def test_missing_wrong_expired_revoked_tokens_get_401_with_the_login_hint(world: World) -> None:
    view, token = world.root.create_token("alice")
    world.secrets.append(token)
    assert (
        call(world, None, "GET", "/whoami", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    )
    world.root.expire_token(view.token_id)
    revoked_view, revoked = world.root.create_token("alice")
    world.secrets.append(revoked)
    world.root.revoke_token(revoked_view.token_id)
    wrong = token[:-4] + ("aaaa" if not token.endswith("aaaa") else "bbbb")
    cases = {
        None: "this server needs a credential (Authorization: Bearer <token>)",
        "garbage": "the credential is not a Daggers token",
        wrong: f"token {view.token_id} is not valid",
        token: f"token {view.token_id} has expired",
        revoked: f"token {revoked_view.token_id} was revoked",
    }
    for presented, message in cases.items():
        headers = {"Authorization": f"Bearer {presented}"} if presented else {}
        r = requests.get(world.api("/daggers"), headers=headers, timeout=30)
        assert r.status_code == 401
        assert r.json() == {
            "error": {
                "title": "Not signed in",
                "message": message,
                "hint": "sign in with: daggers login --server URL",
            }
        }
        assert "\n" not in r.text
    with world.registry.session() as s:
        last = s.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(5)).all()
    assert [(a.allowed, a.credential, a.source) for a in reversed(last)] == [
        (False, None, "127.0.0.1"),
        (False, None, "127.0.0.1"),
        (False, f"token:{view.token_id}", "127.0.0.1"),
        (False, f"token:{view.token_id}", "127.0.0.1"),
        (False, f"token:{revoked_view.token_id}", "127.0.0.1"),
    ]


def test_viewer_deploy_is_403_and_another_teams_dagger_is_404_both_audited(world: World) -> None:
    name = f"rv{next(_counter)}"
    world.root.create(cluster="a-jkt", text=bookings_spec(name))
    r = call(world, "vera", "POST", f"/daggers/team-a/{name}/deploy")
    assert r.status_code == 403
    assert r.json()["error"]["message"] == (
        f"vera cannot deploy dagger team-a/{name}: it needs the editor role in "
        "team 'team-a' (you have viewer)"
    )
    r = call(world, "bob", "POST", f"/daggers/team-a/{name}/deploy")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == f"no dagger 'team-a/{name}' in your teams"
    r = call(world, "bob", "GET", f"/daggers/team-a/{name}")
    assert r.status_code == 404
    with world.registry.session() as s:
        rows = s.scalars(
            select(AuditEntry)
            .where(AuditEntry.target == f"dagger team-a/{name}", AuditEntry.allowed.is_(False))
            .order_by(AuditEntry.id)
        ).all()
        tid = {u: world.root.tokens(u)[0].token_id for u in ("vera", "bob")}
        assert [(a.user, a.action, a.credential, a.source) for a in rows] == [
            ("vera", "deploy", f"token:{tid['vera']}", "127.0.0.1"),
            ("bob", "deploy", f"token:{tid['bob']}", "127.0.0.1"),
            ("bob", "see", f"token:{tid['bob']}", "127.0.0.1"),
        ]
    assert world.root.dagger(f"team-a/{name}").desired_state == "stopped"


# ---- the table: every endpoint x every role x team ------------------------------------------------


@dataclass
class Row:
    """How to call one endpoint on team-a's resources and who may: ``need`` is open, any, viewer, editor,
    admin, superuser or controller; ``hidden`` says a non-member gets 404 (else 403); ``make`` returns
    (path parameters, body, query) on fresh resources; ``run_allowed`` False: the allowed call is not made
    here (it needs Spark or a broker; tests/job/server/test_server_console.py and the CLI tests cover it)."""

    need: str
    make: Callable[[World], tuple[dict[str, Any], Any, dict[str, Any]]]
    hidden: bool = True
    run_allowed: bool = True
    ok: tuple[int, ...] = (200, 201)


def _dagger(w: World, versions: int = 1) -> dict[str, Any]:
    name = f"t{next(_counter)}"
    w.root.create("a-jkt", bookings_spec(name))
    for v in range(2, versions + 1):
        w.root.edit(f"team-a/{name}", bookings_spec(name, measurement=f"m{v}"))
    return {"team": "team-a", "name": name}


def _ctl_token(w: World) -> dict[str, Any]:
    view, token = w.root.create_token(cluster="a-jkt")
    w.secrets.append(token)
    return {"token_id": view.token_id}


def _member(w: World) -> dict[str, Any]:
    user = f"u{next(_counter)}"
    w.root.add_user(user)
    w.root.set_member("team-a", user, "viewer")
    return {"team": "team-a", "user": user}


def _dagger_id(w: World) -> dict[str, Any]:
    d = w.root.create("a-jkt", bookings_spec(f"t{next(_counter)}"))
    return {"cluster": "a-jkt", "dagger_id": d.id}


def _spec(name: str = "x") -> str:
    return bookings_spec(name)


def none(_w: World) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    return {}, None, {}


ENDPOINTS: dict[tuple[str, str], Row] = {
    ("GET", "/health"): Row("open", none),
    ("GET", "/auth/oidc"): Row("open", none, ok=(401,)),  # the test provider is not running: 401, not 5xx
    ("POST", "/auth/oidc/token"): Row("open", lambda w: ({}, {"id_token": "not.a.jwt"}, {}), ok=(401,)),
    ("GET", "/whoami"): Row("any", none),
    ("GET", "/users"): Row("any", none),
    ("POST", "/users"): Row("superuser", lambda w: ({}, {"name": f"n{next(_counter)}"}, {}), hidden=False),
    ("PUT", "/users/{user}/oidc"): Row(
        "superuser", lambda w: (_member(w), {"subject": f"s{next(_counter)}"}, {}), hidden=False
    ),
    ("GET", "/teams"): Row("any", none),
    ("POST", "/teams"): Row(
        "superuser", lambda w: ({}, {"name": f"team-{next(_counter)}"}, {}), hidden=False
    ),
    ("GET", "/teams/{team}/role"): Row("any", lambda w: ({"team": "team-a"}, None, {})),
    ("PUT", "/teams/{team}/members/{user}"): Row("admin", lambda w: (_member(w), {"role": "editor"}, {})),
    ("DELETE", "/teams/{team}/members/{user}"): Row("admin", lambda w: (_member(w), None, {})),
    ("GET", "/datacentres"): Row("any", none),
    ("POST", "/datacentres"): Row(
        "superuser", lambda w: ({}, {"name": f"dc{next(_counter)}"}, {}), hidden=False
    ),
    ("GET", "/audit"): Row("any", none),
    ("GET", "/tokens"): Row("superuser", none, hidden=False),
    ("POST", "/tokens"): Row("admin", lambda w: ({}, {"cluster": "a-jkt"}, {})),
    ("POST", "/tokens/{token_id}/revoke"): Row("admin", lambda w: (_ctl_token(w), None, {})),
    ("POST", "/tokens/{token_id}/expire"): Row("admin", lambda w: (_ctl_token(w), {}, {})),
    ("GET", "/clusters"): Row("any", none),
    ("POST", "/clusters"): Row(
        "admin",
        lambda w: (
            {},
            {
                "name": f"c{next(_counter)}",
                "team": "team-a",
                "datacentre": "jkt",
                "spark_master": "local[2]",
                "kafka_bootstrap": "127.0.0.1:9",
                "influx_url": "http://127.0.0.1:9",
            },
            {},
        ),
    ),
    ("GET", "/clusters/{cluster}"): Row("viewer", lambda w: ({"cluster": "a-jkt"}, None, {})),
    ("PUT", "/clusters/{cluster}/failover"): Row(
        "admin", lambda w: ({"cluster": "a-jkt"}, {"failover_to": "a-sgp"}, {})
    ),
    ("GET", "/clusters/{cluster}/health"): Row("viewer", lambda w: ({"cluster": "a-jkt"}, None, {})),
    ("GET", "/clusters/{cluster}/topics"): Row(
        "viewer", lambda w: ({"cluster": "a-jkt"}, None, {}), run_allowed=False
    ),
    ("GET", "/daggers"): Row("any", none),
    ("GET", "/screens/overview"): Row("any", none),
    ("POST", "/daggers"): Row(
        "editor", lambda w: ({}, {"cluster": "a-jkt", "spec": _spec(f"t{next(_counter)}")}, {})
    ),
    ("POST", "/validate"): Row("viewer", lambda w: ({}, {"cluster": "a-jkt", "spec": _spec()}, {})),
    ("POST", "/preview"): Row(
        "viewer", lambda w: ({}, {"cluster": "a-jkt", "spec": _spec()}, {}), run_allowed=False
    ),
    ("GET", "/daggers/{team}/{name}"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/screen"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/fusible"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/samples"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/moves"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/versions"): Row("viewer", lambda w: (_dagger(w), None, {})),
    ("GET", "/daggers/{team}/{name}/versions/{number}"): Row(
        "viewer", lambda w: ({**_dagger(w), "number": 1}, None, {})
    ),
    ("GET", "/daggers/{team}/{name}/diff"): Row("viewer", lambda w: (_dagger(w, 2), None, {})),
    # the output is read from the dagger's InfluxDB (127.0.0.1:9 here: none): refusals only, as for preview
    ("GET", "/daggers/{team}/{name}/output"): Row(
        "viewer", lambda w: (_dagger(w), None, {"field": "n"}), run_allowed=False
    ),
    ("GET", "/daggers/{team}/{name}/output/fields"): Row(
        "viewer", lambda w: (_dagger(w), None, {}), run_allowed=False
    ),
    ("POST", "/daggers/{team}/{name}/deploy"): Row("editor", lambda w: (_dagger(w), None, {})),
    ("POST", "/daggers/{team}/{name}/stop"): Row("editor", lambda w: (_dagger(w), None, {})),
    ("POST", "/daggers/{team}/{name}/restart"): Row("editor", lambda w: (_dagger(w), None, {})),
    ("DELETE", "/daggers/{team}/{name}"): Row("admin", lambda w: (_dagger(w), None, {})),
    ("POST", "/daggers/{team}/{name}/move"): Row("editor", lambda w: (_dagger(w), {"cluster": "a-sgp"}, {})),
    ("POST", "/daggers/{team}/{name}/check-edit"): Row(
        "viewer", lambda w: ((p := _dagger(w)), {"spec": bookings_spec(p["name"], measurement="m9")}, {})
    ),
    ("PUT", "/daggers/{team}/{name}/spec"): Row(
        "editor",
        lambda w: (
            (p := _dagger(w)),
            {"spec": bookings_spec(p["name"], measurement="m9"), "expected_version": 1},
            {},
        ),
    ),
    ("POST", "/daggers/{team}/{name}/rollback"): Row(
        "editor", lambda w: (_dagger(w, 2), {"to_version": 1}, {})
    ),
    ("POST", "/daggers/{team}/{name}/publish"): Row(
        "editor", lambda w: (_dagger(w), {"topic": "out-topic"}, {})
    ),
    ("POST", "/daggers/{team}/{name}/preview"): Row(
        "viewer", lambda w: (_dagger(w), {}, {}), run_allowed=False
    ),
    ("GET", "/controller/{cluster}/settings"): Row("controller", lambda w: ({"cluster": "a-jkt"}, None, {})),
    ("GET", "/controller/{cluster}/assignments"): Row(
        "controller", lambda w: ({"cluster": "a-jkt"}, None, {})
    ),
    ("GET", "/controller/{cluster}/holder"): Row("controller", lambda w: ({"cluster": "a-jkt"}, None, {})),
    ("POST", "/controller/{cluster}/claim"): Row(
        "controller", lambda w: ({"cluster": "a-jkt"}, {"host": "gw-t", "pid": 4242, "stale_s": 0.001}, {})
    ),
    ("POST", "/controller/{cluster}/release"): Row(
        "controller", lambda w: ({"cluster": "a-jkt"}, {"host": "gw-t", "pid": 4242}, {})
    ),
    ("POST", "/controller/{cluster}/failover"): Row(
        "controller", lambda w: ({"cluster": "a-jkt"}, {"after_s": 3600, "now": 0}, {})
    ),
    ("POST", "/controller/{cluster}/report"): Row(
        "controller",
        lambda w: (
            {"cluster": "a-jkt"},
            {
                "updates": {str(_dagger_id(w)["dagger_id"]): {"actual_state": "running"}},
                "now": 1.0,
                "host": "gw-t",
                "pid": 4242,
            },
            {},
        ),
    ),
}

CALLERS = ("root", "adam", "alice", "vera", "bob", "ctl-a", "ctl-b", None)


def expected(row: Row, who: str | None) -> int | None:
    """Return the refusal status ``who`` must get, or None when they may."""
    if row.need == "open":
        return None
    if who is None:
        return 401
    if row.need == "controller":
        return None if who == "ctl-a" else 403
    if who.startswith("ctl-"):
        return 403
    role = ROLE_OF[who]
    if row.need == "any" or role == "superuser":
        return None
    if row.need == "superuser":
        return 403
    if role is None:
        return 404 if row.hidden else 403
    return None if RANK[role] >= RANK[row.need] else 403


def test_every_endpoint_with_every_role_and_team(world: World) -> None:
    spec = requests.get(world.api("/openapi.json"), timeout=30).json()
    served = {(m.upper(), p.removeprefix("/api/v1")) for p, ops in spec["paths"].items() for m in ops}
    assert served == set(ENDPOINTS), (
        f"endpoints without a row: {served - set(ENDPOINTS)}; "
        f"rows without an endpoint: {set(ENDPOINTS) - served}"
    )
    failures = []
    for (method, path), row in ENDPOINTS.items():
        order = sorted(CALLERS, key=lambda who: expected(row, who) is None)  # the refused first
        done_allowed = False
        for who in order:
            refusal = expected(row, who)
            if refusal is None and (not row.run_allowed or (done_allowed and method != "GET")):
                continue
            params, body, query = row.make(world)  # fresh resources for the calls made only
            url = path.format(**params)
            before, refused_before = fingerprint(world.registry), refusals(world.registry)
            r = call(world, who, method, url, body, params=query)
            if refusal is None:
                done_allowed = True
                if r.status_code not in row.ok:
                    failures.append(f"{who} {method} {url}: {r.status_code} {r.text[:200]}")
                if (
                    who == "bob"
                    and path in ("/daggers", "/clusters", "/screens/overview", "/teams", "/users")
                    and "team-a" in r.text
                ):
                    failures.append(f"bob {method} {url} shows team-a: {r.text[:200]}")
                continue
            if r.status_code != refusal:
                failures.append(f"{who} {method} {url}: {r.status_code}, expected {refusal}: {r.text[:200]}")
            if fingerprint(world.registry) != before:
                failures.append(f"{who} {method} {url}: refused ({r.status_code}) but the registry changed")
            if refusals(world.registry) <= refused_before:
                failures.append(f"{who} {method} {url}: refused ({r.status_code}) but not audited")
    assert failures == []


# ---- controllers ----------------------------------------------------------------------------------


def test_a_controller_credential_acts_on_its_cluster_only(world: World) -> None:
    b = world.root.create("b-jkt", bookings_spec(f"bd{next(_counter)}"))
    a = world.root.create("a-jkt", bookings_spec(f"ad{next(_counter)}"))
    mine = call(world, "ctl-a", "GET", "/controller/a-jkt/assignments").json()
    assert a.id in [d["id"] for d in mine] and b.id not in [d["id"] for d in mine]
    assert call(world, "ctl-a", "GET", "/controller/b-jkt/assignments").status_code == 403
    report = {"now": 1.0, "host": "gw", "pid": 1}
    assert (
        call(
            world,
            "ctl-a",
            "POST",
            "/controller/a-jkt/report",
            {**report, "updates": {str(b.id): {"actual_state": "running"}}},
        ).status_code
        == 404
    )
    assert (
        call(
            world,
            "ctl-a",
            "POST",
            "/controller/a-jkt/report",
            {**report, "samples": [{"dagger_id": b.id, "at": 1.0}]},
        ).status_code
        == 404
    )
    assert (
        call(
            world,
            "ctl-a",
            "POST",
            "/controller/b-jkt/report",
            {**report, "updates": {str(b.id): {"actual_state": "running"}}},
        ).status_code
        == 403
    )
    assert call(world, "ctl-a", "POST", "/users", {"name": "intruder"}).status_code == 403
    assert call(world, "ctl-a", "GET", f"/daggers/team-b/{b.name}/versions/0").status_code == 403
    assert (
        call(
            world,
            "ctl-a",
            "POST",
            "/controller/a-jkt/report",
            {**report, "updates": {str(a.id): {"desired_state": "running"}}},
        ).status_code
        == 422
    )
    assert world.root.dagger(b.ref).actual_state == "created"
    assert "intruder" not in [u["user"] for u in world.root.users()]


# ---- optimistic concurrency ---------------------------------------------------------------------


def test_two_editors_of_one_version_one_wins_the_other_gets_409_with_the_current_version(
    world: World,
) -> None:
    name = f"oc{next(_counter)}"
    world.root.create("a-jkt", bookings_spec(name))
    first = call(
        world,
        "alice",
        "PUT",
        f"/daggers/team-a/{name}/spec",
        {"spec": bookings_spec(name, measurement="alice"), "expected_version": 1},
    )
    second = call(
        world,
        "adam",
        "PUT",
        f"/daggers/team-a/{name}/spec",
        {"spec": bookings_spec(name, measurement="adam"), "expected_version": 1},
    )
    assert first.status_code == 200 and first.json()["version"] == 2
    assert second.status_code == 409
    assert second.json()["error"] == {
        "title": "Conflict",
        "current_version": 2,
        "hint": "reload it and edit again",
        "message": f"dagger team-a/{name} is at version 2, not 1: someone changed it meanwhile",
    }
    assert "measurement: alice" in world.root.version(f"team-a/{name}").spec_text


def test_two_editors_at_the_same_instant_one_wins(world: World) -> None:
    import threading

    name = f"oc{next(_counter)}"
    world.root.create("a-jkt", bookings_spec(name))
    start, answers = threading.Barrier(2), {}

    def edit(who: str) -> None:
        start.wait()
        answers[who] = call(
            world,
            who,
            "PUT",
            f"/daggers/team-a/{name}/spec",
            {"spec": bookings_spec(name, measurement=who), "expected_version": 1},
        )

    threads = [threading.Thread(target=edit, args=(who,)) for who in ("alice", "adam")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r.status_code for r in answers.values())
    assert codes == [200, 409], {w: r.text for w, r in answers.items()}
    winner = next(w for w, r in answers.items() if r.status_code == 200)
    loser = next(r for r in answers.values() if r.status_code == 409)
    assert loser.json()["error"]["current_version"] == 2
    assert [v.version for v in world.root.history(f"team-a/{name}")] == [1, 2]
    assert f"measurement: {winner}" in world.root.version(f"team-a/{name}").spec_text


# ---- bad input -------------------------------------------------------------------------------------


def test_bad_input_gets_a_clear_4xx_and_leaves_the_registry_unchanged(world: World) -> None:
    before = fingerprint(world.registry)
    h = {**world.headers("alice"), "Content-Type": "application/json"}
    r = requests.post(world.api("/daggers"), data=b'{"cluster": "a-jkt", "spec": ', headers=h, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("the request body is not valid JSON")
    big = bookings_spec("big") + "#" * (300 << 10)
    r = call(world, "alice", "POST", "/daggers", {"cluster": "a-jkt", "spec": big})
    assert (r.status_code, r.json()["error"]["message"]) == (
        413,
        f"spec: {len(big):,} bytes is over the limit of 262,144 bytes",
    )
    r = requests.post(world.api("/daggers"), data=b"x" * (2 << 20), headers=h, timeout=30)
    assert (r.status_code, r.json()["error"]["message"]) == (
        413,
        "the request body is over the server's limit of 1,048,576 bytes",
    )

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds as the body streams in
        yield b'{"cluster": "a-jkt", "spec": "'
        yield from (b"x" * 65536 for _ in range(20))
        yield b'"}'

    r = requests.post(world.api("/daggers"), data=chunks(), headers=h, timeout=30)
    assert (r.status_code, r.json()["error"]["title"]) == (413, "Too large")
    r = call(
        world,
        "alice",
        "POST",
        "/daggers",
        {"cluster": "a-jkt", "spec": bookings_spec("typo"), "deplyo": True},
    )
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "deplyo: unknown field; did you mean deploy?",
    )
    for name in ("it's", 'x"; DROP TABLE daggers; --', "a' OR '1'='1"):
        r = call(world, "alice", "POST", "/daggers", {"cluster": "a-jkt", "spec": bookings_spec(name)})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["title"] == "Invalid dagger spec"
        r = call(world, "root", "POST", "/users", {"name": name})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith(
            "name: String should match pattern"
        )
        r = call(world, "alice", "GET", f"/daggers/team-a/{requests.utils.quote(name, safe='')}")
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("dagger name ")
    assert fingerprint(world.registry) == before


# ---- rate limit: tests/job/server/test_server_signin.py (a valid credential is never refused) ------

# ---- secrets --------------------------------------------------------------------------------------


def test_no_token_appears_in_the_log_errors_audit_or_registry(world: World) -> None:
    token = world.tokens["alice"]
    r = call(world, None, "GET", "/whoami", headers={"Authorization": f"Bearer {token}x"})
    assert r.status_code == 401 and token not in r.text
    listed = call(world, "root", "GET", "/tokens").text
    dumped = []
    with world.registry.engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            dumped.append(json.dumps([list(map(str, row)) for row in conn.execute(table.select())]))
    haystacks = {
        "log": world.log.read_text(),
        "token list": listed,
        "registry": "\n".join(dumped),
        "audit": call(world, "root", "GET", "/audit", params={"limit": 10000}).text,
    }
    for secret in world.secrets:
        _id, _, secret_part = secret.removeprefix("dgr_").partition("_")
        for where, hay in haystacks.items():
            assert secret_part not in hay, f"a token's secret is in the {where}"
    assert "token:" in haystacks["audit"]


# ---- a controller through the server -------------------------------------------------------------


def test_a_controller_runs_its_cluster_through_the_server_with_its_token_only(
    world: World, tmp_path: Path
) -> None:
    import time

    from job.control.controller import Controller
    from job.control.errors import PermissionDeniedError
    from job.control.remote import RemoteClusterAgent
    from tests.job.control.test_controller import fake, settings

    name = f"cs{next(_counter)}"
    world.root.create("a-jkt", bookings_spec(name), deploy=True)
    agent = RemoteClusterAgent(world.url, world.tokens["ctl-a"], "a-jkt")
    agent.release("gw-t", 4242)  # the table's report made gw-t a-jkt's controller, at the server's time
    ctl = Controller(agent, "a-jkt", tmp_path / "state", settings=settings(), command=fake({}), host="gw-a")
    ctl.claim()
    try:
        deadline = time.monotonic() + 60
        while True:
            ctl.reconcile_once()
            view = world.root.dagger(f"team-a/{name}")
            if view.actual_state == "running" and len(world.root.samples(f"team-a/{name}")) >= 2:
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.05)
        assert view.progress["input_rows_per_s"] == 1000.0 and view.host == "gw-a"
        assert world.root.cluster("a-jkt").controller_host == "gw-a"
        world.root.stop(f"team-a/{name}")
        deadline = time.monotonic() + 60
        while world.root.dagger(f"team-a/{name}").actual_state != "stopped":
            ctl.reconcile_once()
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        ctl.stop_all(5)
        ctl.close()
        ctl.release()
    assert world.root.cluster("a-jkt").controller_heartbeat is None
    with pytest.raises(PermissionDeniedError):
        RemoteClusterAgent(world.url, world.tokens["ctl-b"], "a-jkt").settings()


def test_daggers_controller_runs_through_the_server_with_its_cluster_token(
    world: World, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    world.root.add_cluster(
        "c-ctl",
        team="team-b",
        datacentre="jkt",
        spark_master="local[2]",
        kafka_bootstrap="127.0.0.1:9",
        influx_url="http://127.0.0.1:9",
    )
    _view, token = world.root.create_token(cluster="c-ctl")
    world.secrets.append(token)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGGERS_")}
    env.update(DAGGERS_SERVER=world.url, DAGGERS_TOKEN=token, DAGGERS_CREDENTIALS=str(tmp_path / "none.json"))
    command = [
        sys.executable,
        "-m",
        "job.cli",
        "controller",
        "--no-standby",
        "--poll",
        "0.2",
        "--state-dir",
        str(tmp_path / "state"),
    ]
    wrong = subprocess.run(
        [*command, "--cluster", "a-jkt"], env=env, capture_output=True, text=True, timeout=120
    )
    assert wrong.returncode == 2
    assert (
        "Permission denied: only cluster a-jkt's controller credential may do this"
        in wrong.stdout + wrong.stderr
    )
    log = tmp_path / "controller.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--cluster", "c-ctl"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            "the controller's heartbeat",
            lambda: world.root.cluster("c-ctl").controller_heartbeat is not None,
            90,
            every_s=0.2,
            proc=proc,
            log=log,
        )
    finally:
        proc.terminate()
        proc.wait(60)
    assert world.root.cluster("c-ctl").controller_heartbeat is None  # released on a clean stop
    assert "controller of c-ctl on" in log.read_text() and world.url in log.read_text()
    assert token.split("_", 2)[2] not in log.read_text() + wrong.stdout + wrong.stderr


def test_code_carried_in_a_spec_is_refused_unless_the_server_takes_it(world: World, tmp_path: Path) -> None:
    """A ``udf_file``'s code carried in a spec (``udf_file_base64``) would run on the controller's host as its
    user: by default the server refuses it on every route that takes a spec, naming the field, and changes
    nothing; ``daggers server --allow-carried-udfs`` takes it."""
    import base64

    code = base64.b64encode(b"def peek():\n    return open('/proc/1/environ').read()\n").decode()
    spec = bookings_spec("carried") + f"udf_file: peek.py\nudf_file_base64: {code}\n"
    before = fingerprint(world.registry)
    for method, path, body in (
        ("POST", "/validate", {"cluster": "a-jkt", "spec": spec}),
        ("POST", "/daggers", {"cluster": "a-jkt", "spec": spec, "deploy": True}),
        ("POST", "/preview", {"cluster": "a-jkt", "spec": spec}),
    ):
        r = call(world, "alice", method, path, body)
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["message"].startswith(
            "udf_file_base64: this server takes no udf_file code from a client"
        ), (path, error)
        assert "--allow-carried-udfs" in error["hint"]
    assert fingerprint(world.registry) == before
    with running_server(world.registry.url, tmp_path / "allowing.log", "--allow-carried-udfs") as base:
        r = requests.post(
            f"{base}/api/v1/validate",
            json={"cluster": "a-jkt", "spec": spec},
            headers=world.headers("alice"),
            timeout=120,
        )
        assert r.status_code == 200 and r.json()["ok"] is True, r.text
