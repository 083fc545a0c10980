"""The server keeps the clock, on a real server and PostgreSQL: a controller reports what it saw, but its
heartbeat is the server's time, failover waits the server's ``--failover-after`` by the server's clock (a
controller may ask for longer, never for shorter), and a NaN or infinite number anywhere in a controller's
body is refused with 422 naming the field."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from sqlalchemy import update

from job.control.agent import ClusterAgent
from job.control.models import Cluster, DaggerStatus
from job.control.registry import Registry
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import World, running_server, seed_tokens

pytestmark = pytest.mark.integration

NF = "not a finite number (NaN, Infinity, or too large)"


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root, tokens = seed_tokens(registry)
    root.set_failover("a-sgp", "a-jkt")  # a-jkt's controller takes over a-sgp's daggers
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(url, log, "--failover-after", "60") as base:
        yield World(base, registry, root, tokens, log, secrets=list(tokens.values()))
    registry.close()


def post(world: World, path: str, body: str | dict[str, Any], who: str = "ctl-a") -> requests.Response:
    """POST ``body`` (a dict, or raw JSON text: NaN and Infinity as Python's json writes them) as ``who``."""
    headers = {**world.headers(who), "Content-Type": "application/json"}
    if isinstance(body, dict):
        return requests.post(world.api(path), json=body, headers=headers, timeout=30)
    return requests.post(world.api(path), data=body.encode(), headers=headers, timeout=30)


def heartbeat(world: World, cluster: str) -> float | None:
    return world.root.cluster(cluster).controller_heartbeat


def set_heartbeat(world: World, cluster: str, at: float) -> None:
    with world.registry.session() as s:
        s.execute(update(Cluster).where(Cluster.name == cluster).values(controller_heartbeat=at))


def test_a_controller_cannot_choose_the_failover_clock(world: World) -> None:
    d = world.root.create("a-sgp", bookings_spec("fo1"), deploy=True)
    ClusterAgent(world.registry, "a-sgp").claim("gw-sgp", 4242, 15, False)  # a-sgp's controller is alive
    for body in (
        {"after_s": 0.001, "now": time.time() + 10},
        {"after_s": 0.001},
        {"now": time.time() + 1e6},
        {},
    ):
        r = post(world, "/controller/a-jkt/failover", body)
        assert (r.status_code, r.json()) == (200, {"moved": []}), body
    assert world.root.dagger(d.ref).cluster == "a-sgp"
    # silent for 120 s by the server's clock: a controller may wait longer than the server's 60 s ...
    set_heartbeat(world, "a-sgp", time.time() - 120)
    r = post(world, "/controller/a-jkt/failover", {"after_s": 3600})
    assert (r.status_code, r.json()) == (200, {"moved": []})
    # ... and without asking, the server's 60 s hold
    r = post(world, "/controller/a-jkt/failover", {"after_s": 0.001})
    assert (r.status_code, r.json()) == (200, {"moved": [d.ref]})
    assert world.root.dagger(d.ref).cluster == "a-jkt"


def test_the_heartbeat_is_the_servers_time_not_the_reported_one(world: World) -> None:
    d = world.root.create("a-jkt", bookings_spec("hb1"))
    before = time.time()
    r = post(
        world,
        "/controller/a-jkt/report",
        {
            "now": before + 3e9,
            "host": "gw-jkt",
            "pid": 4242,
            "updates": {str(d.id): {"actual_state": "stopped"}},
            "health": {"ok": True},
        },
    )
    after = time.time()
    assert (r.status_code, r.json()) == (200, {"ok": True})
    beat = heartbeat(world, "a-jkt")
    assert beat is not None and before <= beat <= after
    with world.registry.session() as s:
        status = s.get(DaggerStatus, d.id)
        assert (
            status is not None and status.actual_state == "stopped" and before <= status.updated_at <= after
        )
        cluster = s.query(Cluster).filter_by(name="a-jkt").one()
        assert cluster.health == {"ok": True} and cluster.health_at == beat


def test_non_finite_numbers_in_controller_bodies_get_422_naming_the_field(world: World) -> None:
    d = world.root.create("a-jkt", bookings_spec("nf1"))
    set_heartbeat(world, "a-jkt", 1234.5)
    nan, inf = math.nan, math.inf
    base = {"host": "gw", "pid": 1}
    cases = [  # json.dumps writes NaN, Infinity and -Infinity; "1e400" is read as infinity
        (json.dumps({"now": nan, **base}), f"now: {NF}"),
        (json.dumps({"now": 0.0, **base}).replace("0.0", "1e400"), f"now: {NF}"),
        (json.dumps({"now": -inf, **base}), f"now: {NF}"),
        (json.dumps({"prune_before": nan, **base}), f"prune_before: {NF}"),
        (
            json.dumps({"updates": {str(d.id): {"started_at": inf}}, **base}),
            f"updates.{d.id}.started_at: {NF}",
        ),
        (
            json.dumps({"updates": {str(d.id): {"progress": {"rates": [1.5, nan]}}}, **base}),
            f"updates.{d.id}.progress.rates.1: {NF}",
        ),
        (
            json.dumps({"samples": [{"dagger_id": d.id, "at": 0.0}], **base}).replace("0.0", "-1e400"),
            f"samples.0.at: {NF}",
        ),
        (json.dumps({"health": {"spark": {"latency_s": nan}}, **base}), f"health.spark.latency_s: {NF}"),
    ]
    for body, message in cases:
        r = post(world, "/controller/a-jkt/report", body)
        assert (r.status_code, r.json()["error"]["message"]) == (422, message), body
    for body, message in {
        '{"after_s": NaN}': f"after_s: {NF}",
        '{"after_s": Infinity}': f"after_s: {NF}",
        '{"now": 1e400}': f"now: {NF}",
    }.items():
        r = post(world, "/controller/a-jkt/failover", body)
        assert (r.status_code, r.json()["error"]["message"]) == (422, message), body
    r = post(world, "/controller/a-jkt/claim", '{"host": "gw", "pid": 1, "stale_s": NaN}')
    assert (r.status_code, r.json()["error"]["message"]) == (422, f"stale_s: {NF}")
    assert heartbeat(world, "a-jkt") == 1234.5  # nothing was written
    assert world.root.dagger(d.ref).actual_state == "created"
    assert world.root.samples(d.ref) == []
