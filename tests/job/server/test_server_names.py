"""Another team's names are not revealed, over a real server on a PostgreSQL registry: what a user may not see
answers exactly as what does not exist (the same status and the same message with the name they gave),
whether it is a team, a cluster, a dagger or a controller token; a cluster name taken by anyone answers
the same 409; and a user's own refused attempts in the audit log do not say whose it was.

Names that stay global on purpose: users (a team admin adds members by name, so "no user" answers for a
name nobody has) and data centres (every user lists them)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from job.control.registry import Registry
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import World, running_server, seed_tokens

pytestmark = pytest.mark.integration

_counter = itertools.count(1)


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root, tokens = seed_tokens(registry)
    root.create("b-jkt", bookings_spec("b-secret"))
    root.create("a-jkt", bookings_spec("a-own"))
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(url, log, "--max-failed-signins", "1000") as base:
        yield World(base, registry, root, tokens, log, secrets=list(tokens.values()))
    registry.close()


def call(world: World, who: str, method: str, path: str, body: Any = None, **query: Any) -> tuple[int, Any]:
    r = requests.request(
        method, world.api(path), headers=world.headers(who), json=body, params=query, timeout=60
    )
    return r.status_code, r.json()


def error(status: int, title: str, message: str, hint: str | None = None) -> tuple[int, Any]:
    return status, {"error": {"title": title, "message": message, "hint": hint}}


def cluster_body(name: str, team: str = "team-a", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "team": team,
        "datacentre": "jkt",
        "spark_master": "local[2]",
        "kafka_bootstrap": "127.0.0.1:9",
        "influx_url": "http://127.0.0.1:9",
        **more,
    }


def test_a_cluster_name_taken_by_any_team_gets_the_same_409(world: World) -> None:
    taken = "cluster names are unique across all teams: choose another"
    assert call(world, "adam", "POST", "/clusters", cluster_body("b-jkt")) == error(
        409, "Conflict", "cluster name 'b-jkt' is not available", taken
    )  # team-b's (was "... exists")
    assert call(world, "adam", "POST", "/clusters", cluster_body("a-sgp")) == error(
        409, "Conflict", "cluster name 'a-sgp' is not available", taken
    )  # team-a's own
    name = f"c-new{next(_counter)}"
    status, body = call(world, "adam", "POST", "/clusters", cluster_body(name))
    assert (status, body["name"], body["team"]) == (201, name, "team-a")


def test_another_team_answers_as_an_unknown_team(world: World) -> None:
    for team in ("team-b", "team-zz"):  # team-b exists (adam is not in it), team-zz does not
        unknown = error(404, "Not found", f"no team {team!r}")
        new = cluster_body(f"c{next(_counter)}", team=team)
        assert call(world, "adam", "POST", "/clusters", new) == unknown
        assert call(world, "adam", "PUT", f"/teams/{team}/members/vera", {"role": "viewer"}) == unknown
        assert call(world, "adam", "DELETE", f"/teams/{team}/members/bob") == unknown
        assert call(world, "alice", "GET", f"/teams/{team}/role") == (200, {"team": team, "role": None})
    teams = {u["user"]: u["teams"] for u in world.root.users()}
    assert (teams["bob"], teams["vera"]) == ({"team-b": "editor"}, {"team-a": "viewer"})
    # a member with a lower role is told it is the role (the team is theirs to know)
    assert call(world, "vera", "PUT", "/teams/team-a/members/bob", {"role": "viewer"}) == error(
        403,
        "Permission denied",
        "vera cannot manage members of team team-a: it needs the admin role in "
        "team 'team-a' (you have viewer)",
    )


def test_another_teams_clusters_and_daggers_answer_as_unknown_ones(world: World) -> None:
    for cluster in ("b-jkt", "zz-jkt"):
        unknown = error(404, "Not found", f"no cluster {cluster!r} in your teams")
        assert call(world, "alice", "GET", f"/clusters/{cluster}") == unknown
        assert call(world, "alice", "GET", f"/clusters/{cluster}/health") == unknown
        spec = {"cluster": cluster, "spec": bookings_spec("x1")}
        assert call(world, "alice", "POST", "/daggers", spec) == unknown
        assert call(world, "alice", "POST", "/validate", spec) == unknown
        assert call(world, "alice", "POST", "/daggers/team-a/a-own/move", {"cluster": cluster}) == unknown
        assert call(world, "adam", "PUT", "/clusters/a-jkt/failover", {"failover_to": cluster}) == unknown
        new = cluster_body(f"c{next(_counter)}", failover_to=cluster)
        assert call(world, "adam", "POST", "/clusters", new) == unknown
        assert call(world, "adam", "POST", "/tokens", {"cluster": cluster}) == unknown
        assert call(world, "alice", "GET", "/daggers", cluster=cluster) == unknown
    for ref in ("team-b/b-secret", "team-b/b-nothing", "-/b-secret", "-/b-nothing"):
        shown = ref.removeprefix("-/")
        unknown = error(404, "Not found", f"no dagger {shown!r} in your teams")
        assert call(world, "alice", "GET", f"/daggers/{ref}") == unknown
        assert call(world, "alice", "POST", f"/daggers/{ref}/stop") == unknown
        assert call(world, "alice", "GET", f"/daggers/{ref}/versions/1") == unknown


def test_another_teams_controller_token_answers_as_an_unknown_token(world: World) -> None:
    theirs = world.root.create_token(cluster="b-jkt")[0].token_id
    for token_id in (theirs, "0123456789ab"):  # team-b's controller token; no token
        unknown = error(404, "Not found", f"no token {token_id!r}")
        assert call(world, "adam", "POST", f"/tokens/{token_id}/revoke") == unknown  # unknown: was 403
        assert call(world, "adam", "POST", f"/tokens/{token_id}/expire", {}) == unknown
    assert world.root.tokens()[-1].revoked_at is None


def test_users_are_added_by_superusers_whatever_the_name(world: World) -> None:
    for name in ("bob", "nobody"):  # bob exists, nobody does not: the same refusal
        assert call(world, "adam", "POST", "/users", {"name": name}) == error(
            403, "Permission denied", f"adam cannot add user {name}: only a superuser can"
        )
    users = {u["user"] for u in call(world, "alice", "GET", "/users")[1]}
    assert users == {"adam", "alice", "vera"}  # the members of her team: not bob, not root


def test_ones_own_refusals_in_the_audit_log_do_not_name_the_other_team(world: World) -> None:
    call(world, "alice", "GET", "/clusters/b-jkt")
    call(world, "alice", "GET", "/daggers/-/b-secret")
    status, entries = call(world, "alice", "GET", "/audit", limit=2)
    assert status == 200
    assert [(e["user"], e["action"], e["team"], e["target"], e["allowed"]) for e in entries] == [
        ("alice", "see", None, "dagger b-secret", False),
        ("alice", "see", None, "cluster b-jkt", False),
    ]
    # team-b's members see the attempts on their team's things, with the team
    status, entries = call(world, "bob", "GET", "/audit", limit=50)
    seen = [(e["user"], e["team"], e["target"]) for e in entries if e["user"] == "alice"]
    assert seen[:2] == [("alice", "team-b", "dagger b-secret"), ("alice", "team-b", "cluster b-jkt")]
