"""Malformed input to a real server on a PostgreSQL registry: every one gets a 4xx with the project's error
body naming the field, never a 5xx, and the registry is left as it was; an unreachable registry gets a 503
that does not name the registry's user, host, port or database (the server logs them, not the password)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from job.control.registry import Registry
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import World, running_server, seed_tokens
from tests.job.server.test_server_auth import fingerprint

pytestmark = pytest.mark.integration

BIG = 2**63
RANGE = f"is out of range (at most {BIG - 1})"
FINITE = "not a finite number (NaN, Infinity, or too large)"
NUL = "a NUL character is not allowed"


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root, tokens = seed_tokens(registry)
    root.create("a-jkt", bookings_spec("mf"))
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(url, log, "--max-failed-signins", "1000") as base:
        yield World(base, registry, root, tokens, log, secrets=list(tokens.values()))
    registry.close()


def _deep_json(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


REPORT = {"now": 1.0, "host": "gw", "pid": 1}
CLAIM = {"host": "gw", "pid": 1, "stale_s": 1}
BAD, MALFORMED, OUTPUT = "Invalid request", "Malformed request", "Cannot read the dagger's output"
EDIT = {"spec": bookings_spec("mf", measurement="m2"), "expected_version": 1}
ISO = "is not an ISO 8601 time between 1970 and 9999"

#: (who, method, path, body: a JSON value, or bytes sent as they are, query) -> (status, title, message)
CASES: list[tuple[str, str, str, Any, dict[str, Any], tuple[int, str, str]]] = [
    # NUL characters, which PostgreSQL cannot store (were 503 naming the registry)
    (
        "root",
        "POST",
        "/datacentres",
        {"name": "dcx", "description": "a\x00b"},
        {},
        (422, BAD, f"description: {NUL}"),
    ),
    (
        "alice",
        "PUT",
        "/daggers/team-a/mf/spec",
        {**EDIT, "comment": "\x00"},
        {},
        (422, BAD, f"comment: {NUL}"),
    ),
    ("alice", "POST", "/daggers/team-a/mf/publish", {"topic": "t\x00"}, {}, (422, BAD, f"topic: {NUL}")),
    (
        "adam",
        "POST",
        "/tokens",
        {"cluster": "a-jkt", "description": "x\x00"},
        {},
        (422, BAD, f"description: {NUL}"),
    ),
    ("ctl-a", "POST", "/controller/a-jkt/claim", {**CLAIM, "host": "gw\x00"}, {}, (422, BAD, f"host: {NUL}")),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/report",
        {**REPORT, "health": {"k\x00": 1}},
        {},
        (422, BAD, "health: the key 'k\\x00' has a NUL character, which is not allowed"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        {"cluster": "a-jkt", "spec": "name: a\x00"},
        {},
        (422, BAD, f"spec: {NUL}"),
    ),
    ("root", "GET", "/audit", None, {"target": "a\x00b"}, (422, BAD, f"query parameter 'target': {NUL}")),
    ("root", "GET", "/tokens", None, {"user": "\x00"}, (422, BAD, f"query parameter 'user': {NUL}")),
    # integers beyond 64 bits, or beyond the registry's 32-bit columns (were 503 "integer out of range")
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/claim",
        {**CLAIM, "pid": BIG},
        {},
        (422, BAD, f"pid: {BIG} {RANGE}"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/claim",
        {**CLAIM, "pid": 2**31},
        {},
        (422, BAD, "pid: 2147483648 is not a whole number over 0 and up to 2147483647"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/release",
        {"host": "gw", "pid": -1},
        {},
        (422, BAD, "pid: -1 is not a whole number over 0 and up to 2147483647"),
    ),
    (
        "alice",
        "POST",
        "/daggers/team-a/mf/rollback",
        {"to_version": BIG},
        {},
        (422, BAD, f"to_version: {BIG} {RANGE}"),
    ),
    (
        "alice",
        "PUT",
        "/daggers/team-a/mf/spec",
        {"spec": "x", "expected_version": 2**64},
        {},
        (422, BAD, f"expected_version: {2**64} {RANGE}"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/report",
        {**REPORT, "samples": [{"dagger_id": 1, "lag": -BIG - 1}]},
        {},
        (422, BAD, f"samples.0.lag: {-BIG - 1} {RANGE}"),
    ),
    (
        "vera",
        "GET",
        f"/daggers/team-a/mf/versions/{2**64}",
        None,
        {},
        (422, BAD, f"path parameter 'number': {2**64} {RANGE}"),
    ),
    (
        "vera",
        "GET",
        "/daggers/team-a/mf/diff",
        None,
        {"a": BIG},
        (422, BAD, f"query parameter 'a': {BIG} {RANGE}"),
    ),
    (
        "vera",
        "GET",
        "/audit",
        None,
        {"limit": 10**30},
        (422, BAD, f"query parameter 'limit': {str(10**30)[:30]} {RANGE}"),
    ),
    # numbers that are not finite: NaN, Infinity, and 1e400 (read as infinity)
    (
        "alice",
        "POST",
        "/validate",
        b'{"cluster": "a-jkt", "spec": "x", "minutes": 1e400}',
        {},
        (422, BAD, f"minutes: {FINITE}"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        b'{"cluster": "a-jkt", "spec": "x", "minutes": NaN}',
        {},
        (422, BAD, f"minutes: {FINITE}"),
    ),
    (
        "alice",
        "POST",
        "/daggers/team-a/mf/preview",
        b'{"minutes": -Infinity}',
        {},
        (422, BAD, f"minutes: {FINITE}"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/claim",
        b'{"host": "gw", "pid": 1, "stale_s": Infinity}',
        {},
        (422, BAD, f"stale_s: {FINITE}"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/report",
        b'{"now": 1, "host": "gw", "pid": 1, "samples": [{"dagger_id": 1, "at": 1e999}]}',
        {},
        (422, BAD, f"samples.0.at: {FINITE}"),
    ),
    ("root", "POST", "/tokens/aaaaaaaaaaaa/expire", b'{"at": NaN}', {}, (422, BAD, f"at: {FINITE}")),
    # nesting, digits, encoding, syntax
    (
        "alice",
        "POST",
        "/validate",
        ("[" * 100_000 + "]" * 100_000).encode(),
        {},
        (400, MALFORMED, "the request body is nested too deeply to read"),
    ),
    (
        "ctl-a",
        "POST",
        "/controller/a-jkt/report",
        ('{"now": 1, "host": "gw", "pid": 1, "health": ' + _deep_json(40) + "}").encode(),
        {},
        (422, BAD, "health" + ".a" * 32 + ": nested deeper than 32 levels"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        b'{"cluster": "a-jkt", "spec": "x", "limit": 1' + b"0" * 5000 + b"}",
        {},
        (400, MALFORMED, "a number in the request body has too many digits"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        b'{"cluster": "a-jkt", "spec": "\xff\xfe"}',
        {},
        (400, MALFORMED, "the request body is not UTF-8 text"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        b'{"cluster": "a-jkt", "spec": ',
        {},
        (400, MALFORMED, "the request body is not valid JSON: Expecting value"),
    ),
    (
        "alice",
        "POST",
        "/validate",
        b"[1, 2]",
        {},
        (400, MALFORMED, "the request body is not a JSON object (send Content-Type: application/json)"),
    ),
    # query parameters a route reads
    (
        "vera",
        "GET",
        "/daggers/team-a/mf/output",
        None,
        {"field": "n", "until": "yesterday"},
        (422, OUTPUT, f"until 'yesterday' {ISO}"),
    ),
    (
        "vera",
        "GET",
        "/daggers/team-a/mf/output",
        None,
        {"field": "n", "until": "0001-01-01T00:00:00+01:00"},
        (422, OUTPUT, f"until '0001-01-01T00:00:00+01:00' {ISO}"),
    ),
    (
        "vera",
        "GET",
        "/daggers/team-a/mf/output",
        None,
        {"field": "n", "since_s": 10**15},
        (422, BAD, f"query.since_s: {10**15} is not a whole number up to 316224000"),
    ),
    (
        "vera",
        "GET",
        "/daggers/team-a/mf/output",
        None,
        {"field": "n", "step_s": 0},
        (422, BAD, "query.step_s: 0 is not a whole number from 1 to 316224000"),
    ),
    # what the server does not serve
    ("vera", "GET", "/nowhere", None, {}, (404, "Not found", "no route '/api/v1/nowhere'")),
    (
        "vera",
        "PATCH",
        "/daggers",
        None,
        {},
        (405, "Method not allowed", "PATCH is not allowed on '/api/v1/daggers'"),
    ),
]


def _id(case: tuple[Any, ...]) -> str:
    who, method, path, body, query, (status, _t, message) = case
    return f"{who}-{method}-{path}-{status}-{message[:30]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_malformed_input_gets_a_4xx_naming_the_field_and_changes_nothing(
    world: World, case: tuple[str, str, str, Any, dict[str, Any], tuple[int, str, str]]
) -> None:
    who, method, path, body, query, (status, title, message) = case
    before = fingerprint(world.registry)
    headers = {**world.headers(who), "Content-Type": "application/json"}
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    r = requests.request(method, world.api(path), data=data, params=query, headers=headers, timeout=60)
    hint = "e.g. 2026-01-31T10:00:00Z" if title == OUTPUT else None
    expected = {"error": {"title": title, "message": message, "hint": hint}}
    assert (r.status_code, r.json()) == (status, expected)
    assert fingerprint(world.registry) == before


def test_a_spec_nested_5000_deep_is_a_422(world: World) -> None:
    """The spec text's YAML is read with a depth limit (its loader is job.check's); here: the answer is a 422
    that says so, in both the check and the create."""
    spec = "name: " + "[" * 5000 + "]" * 5000
    body = {"cluster": "a-jkt", "spec": spec}
    r = requests.post(world.api("/validate"), json=body, headers=world.headers("vera"), timeout=60)
    assert (r.status_code, r.json()["ok"], r.json()["title"]) == (200, False, "Invalid dagger spec")
    assert r.json()["message"].endswith("nested more than 32 levels deep")
    r = requests.post(world.api("/daggers"), json=body, headers=world.headers("alice"), timeout=60)
    assert (r.status_code, r.json()["error"]["title"]) == (422, "Invalid dagger spec")
    assert r.json()["error"]["message"].endswith("nested more than 32 levels deep")


def test_openapi_describes_the_error_body_of_every_route(world: World) -> None:
    spec = requests.get(world.api("/openapi.json"), timeout=30).json()
    codes = {"400", "401", "403", "404", "409", "413", "422", "429", "503"}
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            errors = {
                c: r["content"]["application/json"]["schema"]
                for c, r in op["responses"].items()
                if c in codes
            }
            assert errors == {c: {"$ref": "#/components/schemas/ErrorOut"} for c in codes}, (method, path)
    assert spec["components"]["schemas"]["ErrorOut"]["required"] == ["error"]
    assert "HTTPValidationError" not in spec["components"]["schemas"]


# ---- an unreachable registry ------------------------------------------------------------------------


@pytest.fixture
def own_registry(postgres: Any) -> Iterator[tuple[str, str, str, str]]:
    """A database of its own owned by a role with a password (in the URL, as an operator may write it);
    yields (URL, role, database, password) and drops both."""
    suffix = uuid.uuid4().hex[:8]
    role, database, password = f"ops_{suffix}", f"reg_{suffix}", f"pw-{uuid.uuid4().hex}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f'CREATE DATABASE "{database}" OWNER {role}')
    url = f"postgresql://{role}:{password}@127.0.0.1:{postgres.port}/{database}"
    yield url, role, database, password
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
        conn.execute(f'DROP DATABASE "{database}"')
        conn.execute(f"DROP ROLE {role}")


def test_an_unreachable_registry_is_a_503_that_names_nothing_of_it(
    postgres: Any, own_registry: tuple[str, str, str, str], tmp_path: Path
) -> None:
    url, role, database, password = own_registry
    registry = Registry(url)
    _root, tokens = seed_tokens(registry)
    registry.close()
    log = tmp_path / "server.log"
    headers = {"Authorization": f"Bearer {tokens['vera']}"}
    with running_server(url, log) as base, psycopg.connect(postgres.dsn, autocommit=True) as admin:
        assert requests.get(f"{base}/api/v1/whoami", headers=headers, timeout=30).status_code == 200
        # the registry's database stops taking connections, and the server's are cut: a real outage of it
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,)
        )
        r = requests.get(f"{base}/api/v1/daggers", headers=headers, timeout=30)
        assert (r.status_code, r.json()) == (
            503,
            {
                "error": {
                    "title": "Registry error",
                    "message": "the registry is unreachable",
                    "hint": "try again in a moment",
                }
            },
        )
        for secret in (role, database, str(postgres.port), "127.0.0.1", password):
            assert secret not in r.text
        # the server's log has what an operator needs, without the password
        where = (
            f"registry postgresql+psycopg://{role}:***@127.0.0.1:{postgres.port}/{database}: "
            "OperationalError: "
        )
        wait_until("the outage in the server's log", lambda: where in log.read_text(), 30)
        assert password not in log.read_text()
        # and it serves again once the registry is back
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        r = requests.get(f"{base}/api/v1/whoami", headers=headers, timeout=30)
        assert (r.status_code, r.json()["user"]) == (200, "vera")
