"""An OpenAPI-driven fuzz run (schemathesis) against a real ``daggers server`` process on a PostgreSQL
registry, once per role: no credential, viewer vera, editor alice, team admin adam, superuser root and
controller ctl-a.

Every operation the server describes in its OpenAPI gets generated requests, over HTTP: valid ones and
invalid ones (schemathesis's positive and negative modes), once with generated path parameters and once on
the seeded team's real resources (team-a, cluster a-jkt, a dagger, a spare controller token) so that the
requests reach the operations and not only their 404. Each role fuzzes a freshly seeded registry (a
superuser's requests delete and revoke). Every answer must be:

* no 5xx;
* as the OpenAPI describes it (its status is one the operation documents, and its body matches that
  status's schema: every error is ``{"error": {"title", "message", "hint"}}``);
* free of the registry's address (its database name, and ``postgresql``) and of every secret: the registry's
  password, each token's secret and its hash, whether seeded or handed out by an earlier answer (a new token's
  answer holds it once, as the OpenAPI says);
* free of a stack trace (Python's ``Traceback`` line or a frame's ``File "/...``), and of the media type
  the OpenAPI does not document; a request the OpenAPI calls invalid is refused (4xx).

The run is bounded and repeatable: ``EXAMPLES`` generated requests per operation and mode (set
``DAGGERS_FUZZ_EXAMPLES`` for a longer run), derandomized, no shrinking (a failure is reported with the
curl command that reproduces it). The previews (Spark in the server) and the brokers' topics and live health
(a 5-s Kafka timeout each) get generated names only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from job.control.registry import Registry
from job.control.tokens import split_token
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import World, running_server, seed_tokens

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The roles, by the token's owner in server_world (None: no credential).
ROLES = (None, "vera", "alice", "adam", "root", "ctl-a")
#: Generated requests per operation and mode (positive, negative), on generated or real paths.
EXAMPLES = int(os.environ.get("DAGGERS_FUZZ_EXAMPLES", "5"))
#: Operations that get generated path parameters only: on a real dagger or cluster they start Spark in the
#: server (previews) or wait for the brokers' timeout (topics, live health).
GENERATED_ONLY = {
    "POST /api/v1/preview",
    "POST /api/v1/daggers/{team}/{name}/preview",
    "GET /api/v1/clusters/{cluster}/topics",
    "GET /api/v1/clusters/{cluster}/health",
}
#: A server, the role, and the real resources to aim at.
Fuzzed = tuple[World, str | None, dict[str, Any]]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    negative_data_rejection,
]
#: What a stack trace in an answer would hold: its first line, or a frame of a file.
TRACE = ("Traceback (most recent call last)", 'File "/')
#: The operations without a credential.
OPEN = {"GET /api/v1/health", "GET /api/v1/auth/oidc", "POST /api/v1/auth/oidc/token"}
#: The registry's password: the test server trusts any, so the server is given one to keep to itself.
REGISTRY_PASSWORD = f"regpw{uuid.uuid4().hex[:16]}"


def token_secrets(token: str) -> list[str]:
    """The parts of a token no answer may hold: its secret (after the public id) and the secret's hash."""
    parts = split_token(token)
    assert parts is not None, "not a token"
    return [parts[1], hashlib.sha256(parts[1].encode()).hexdigest()]


def budget(who: str | None, label: str) -> int:
    """Return how many requests per mode ``who`` sends to operation ``label``: EXAMPLES where the role gets
    past sign-in (a refused credential is refused before anything else is read), 2 elsewhere."""
    if label in OPEN or (who == "ctl-a" and "/controller/" in label) or who not in (None, "ctl-a"):
        return EXAMPLES
    return 2


@pytest.fixture(params=ROLES, ids=[r or "no-token" for r in ROLES])
def fuzzed(request: pytest.FixtureRequest, postgres: Any, tmp_path: Path) -> Iterator[Fuzzed]:
    """A server on a freshly seeded registry, the role, and the real resources to aim at."""
    url = postgres_url(postgres.dsn).replace("://postgres@", f"://postgres:{REGISTRY_PASSWORD}@", 1)
    assert REGISTRY_PASSWORD in url
    registry = Registry(url)
    root, tokens = seed_tokens(registry)
    root.create("a-jkt", bookings_spec("fz"))
    root.edit("team-a/fz", bookings_spec("fz", measurement="v2"))
    root.create("a-jkt", bookings_spec("fz-gone"))
    spare = root.create_token(cluster="a-sgp", description="spare")[0].token_id
    real = {
        "team": "team-a",
        "name": "fz",
        "cluster": "a-jkt",
        "user": "vera",
        "token_id": spare,
        "number": 1,
    }
    log = tmp_path / "server.log"
    with running_server(
        url,
        log,
        "--max-failed-signins",
        "1000000",
        "--oidc-issuer",
        "http://127.0.0.1:9/idp",
        "--oidc-client-id",
        "daggers",
    ) as base:
        yield World(base, registry, root, tokens, log, secrets=list(tokens.values())), request.param, real
    registry.close()


def negatable(operation: Any) -> bool:
    """Whether schemathesis can make an invalid request for ``operation``: it has a body, or a parameter
    whose schema is more than "any string" (an operation with only free strings has none)."""
    if operation.body:
        return True
    for param in operation.iter_parameters():
        schema = {k: v for k, v in param.definition.get("schema", {}).items() if k != "title"}
        if schema not in ({"type": "string"}, {"anyOf": [{"type": "string"}, {"type": "null"}]}):
            return True
    return False


def aimed(real: dict[str, Any]) -> Callable[[Any], Any]:
    """Return a function that points a generated case's body at the real team, cluster and data centre."""

    def aim(case: Any) -> Any:
        if isinstance(case.body, dict):
            for key, value in (("cluster", real["cluster"]), ("team", real["team"]), ("datacentre", "jkt")):
                if key in case.body:
                    case.body[key] = value
        return case

    return aim


def test_no_5xx_and_answers_as_described_for_every_role(fuzzed: Fuzzed) -> None:
    world, who, real = fuzzed
    raw = requests.get(world.api("/openapi.json"), timeout=30).json()
    schema = schemathesis.openapi.from_dict(raw)
    headers = world.headers(who)
    database = world.registry.url.rsplit("/", 1)[1]
    session = requests.Session()
    failures: list[tuple[int, str]] = []
    sent = 0
    reached: set[str] = set()
    secrets = [REGISTRY_PASSWORD] + [s for token in world.tokens.values() for s in token_secrets(token)]

    def check(case: Any) -> None:
        nonlocal sent
        sent += 1
        reached.add(case.operation.label)
        response = case.call(base_url=world.url, session=session, headers=headers, timeout=120)
        problems = []
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except BaseException as exc:  # schemathesis's FailureGroup names every failed check
            problems.append(str(exc).split("Reproduce with")[0].strip())
        if any(t in response.text for t in TRACE):
            problems.append(f"the answer holds a stack trace: {response.text[:300]}")
        if database in response.text or "postgresql" in response.text.lower():
            problems.append(f"the answer names the registry: {response.text[:300]}")
        if leaked := [s for s in secrets if s in response.text]:
            problems.append(f"the answer holds {len(leaked)} secret(s): {response.text[:300]}")
        with contextlib.suppress(ValueError):
            body = response.json()
            issued = body.get("token") if isinstance(body, dict) and response.status_code < 300 else None
            if isinstance(issued, str) and split_token(
                issued
            ):  # a new token or session: a secret from now on
                secrets.extend(token_secrets(issued))
        if problems:
            curl = case.as_curl_command(headers=headers, base_url=world.url)
            failures.append(
                (
                    response.status_code,
                    f"{who} {case.operation.label} -> {response.status_code}\n"
                    f"{curl[:600]}\n" + "\n".join(problems)[:1500],
                )
            )

    for result in schema.get_all_operations():
        operation = result.ok()
        path_names = {p.name for p in operation.path_parameters}
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if negatable(operation) else [])
        strategies = [operation.as_strategy(generation_mode=mode) for mode in modes]
        if operation.label not in GENERATED_ONLY and (path_names or operation.body):
            fixed = {k: v for k, v in real.items() if k in path_names} or None
            strategies += [
                operation.as_strategy(generation_mode=mode, path_parameters=fixed).map(aimed(real))
                for mode in modes
            ]
        run = settings(
            max_examples=budget(who, operation.label) * len(modes),
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )(given(case=st.one_of(strategies))(check))
        with contextlib.suppress(Unsatisfiable):
            run()
    assert sent > 60
    every = {result.ok().label for result in schema.get_all_operations()}
    assert sorted(every - reached) == []  # every route the OpenAPI describes got requests
    failures.sort(key=lambda f: -f[0])  # the 5xx first
    by_status = sorted({code: sum(1 for c, _ in failures if c == code) for code, _ in failures}.items())
    assert failures == [], (
        f"{len(failures)} of {sent} requests failed (by status: {by_status}):\n\n"
        + "\n\n".join(text for _, text in failures[:20])
    )
