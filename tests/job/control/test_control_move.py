"""Moving a dagger between clusters: who may (per team, audited), the hand-off between two controllers
(the old one stops it, the new one starts it on the same checkpoint, never both at once), automatic
failover when a cluster's controller is gone, and an unreachable checkpoint. Real processes stand in
for daggers (fake_dagger.py); the real Spark dagger is in test_control_failover_e2e.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from job.cli.control import register
from job.control import (
    ConflictError,
    ControlError,
    ControlPlane,
    NotFoundError,
    PermissionDeniedError,
    Registry,
)
from job.control.controller import Controller
from job.control.models import Cluster, DaggerStatus
from job.stack.process import pid_alive
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import fake, settings, sqlite_registry, until

__all__ = ["sqlite_registry"]


def test_only_the_team_s_editors_move_only_to_the_team_s_clusters(registry: Registry) -> None:
    root = seed(registry)
    alice, vera, bob, adam = (ControlPlane(registry, u) for u in ("alice", "vera", "bob", "adam"))
    alice.create("a-jkt", bookings_spec("mover"), deploy=True)
    bob.create("b-jkt", bookings_spec("theirs"))
    with pytest.raises(NotFoundError):
        bob.move("team-a/mover", "b-jkt")  # team B does not even see it
    with pytest.raises(NotFoundError):
        bob.move("theirs", "a-sgp")  # nor team A's clusters
    with pytest.raises(PermissionDeniedError):
        vera.move("mover", "a-sgp")  # a viewer
    with pytest.raises(ControlError, match="belongs to team team-b"):
        root.move("team-a/mover", "b-jkt")  # not even a superuser moves it to another team's cluster
    with pytest.raises(ConflictError, match="already is on cluster a-jkt"):
        alice.move("mover", "a-jkt")
    moved = alice.move("mover", "a-sgp", reason="jkt maintenance")
    assert (moved.cluster, moved.moving_from, moved.desired_state) == ("a-sgp", "a-jkt", "running")
    with pytest.raises(ConflictError, match="still moving from a-jkt"):
        adam.move("mover", "a-jkt")
    assert [d.ref for d in alice.daggers("a-sgp")] == ["team-a/mover"] and alice.daggers("a-jkt") == []
    [entry] = alice.moves("mover")
    assert (
        entry.user,
        entry.action,
        entry.details["from"],
        entry.details["to"],
        entry.details["reason"],
    ) == ("alice", "move", "a-jkt", "a-sgp", "jkt maintenance")
    assert time.time() - entry.at < 60
    refused = [(e.user, e.action) for e in root.audit(target="mover") if not e.allowed]
    assert refused == [("vera", "move"), ("bob", "move")]
    assert ("bob", "move daggers to") in [
        (e.user, e.action) for e in root.audit(target="a-sgp") if not e.allowed
    ]

    # failover settings: the team's admin, to a cluster of the same team
    with pytest.raises(PermissionDeniedError):
        alice.set_failover("a-jkt", "a-sgp")
    with pytest.raises(ControlError, match="belongs to team team-b"):
        root.set_failover("a-jkt", "b-jkt")
    with pytest.raises(ControlError, match="itself"):
        adam.set_failover("a-jkt", "a-jkt")
    assert adam.set_failover("a-jkt", "a-sgp").failover_to == "a-sgp"
    assert {c.name: c.failover_to for c in alice.clusters()} == {"a-jkt": "a-sgp", "a-sgp": None}
    assert adam.set_failover("a-jkt", None).failover_to is None
    with pytest.raises(NotFoundError):
        adam.add_cluster(
            "a-new",
            team="team-a",
            datacentre="jkt",
            spark_master="local[2]",
            kafka_bootstrap="127.0.0.1:9",
            influx_url="http://127.0.0.1:9",
            failover_to="b-jkt",
        )


def test_move_on_the_command_line(sqlite_registry: Registry) -> None:
    seed(sqlite_registry)
    ControlPlane(sqlite_registry, "alice").create("a-jkt", bookings_spec("cli-mover"))
    app = CliRunner()
    cli = typer.Typer()
    register(cli)
    r = ["--registry", sqlite_registry.url, "--json"]
    out = app.invoke(cli, ["dagger", "move", "cli-mover", "--cluster", "a-sgp", "-u", "alice", *r])
    assert out.exit_code == 0 and json.loads(out.output)["dagger"]["moving_from"] == "a-jkt", out.output
    out = app.invoke(cli, ["dagger", "move", "cli-mover", "--cluster", "b-jkt", "-u", "alice", *r])
    assert out.exit_code == 2 and "no cluster 'b-jkt'" in json.loads(out.output)["error"]["message"]
    shown = json.loads(app.invoke(cli, ["dagger", "show", "cli-mover", "-u", "alice", *r]).output)
    assert (shown["cluster"], [(m["user"], m["details"]["to"]) for m in shown["moves"]]) == (
        "a-sgp",
        [("alice", "a-sgp")],
    )
    out = app.invoke(cli, ["cluster", "failover", "a-jkt", "--to", "a-sgp", "-u", "adam", *r])
    assert json.loads(out.output)["cluster"]["failover_to"] == "a-sgp", out.output


def test_the_old_cluster_stops_it_then_the_new_one_resumes_it(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("hop"), deploy=True)
    one = Controller(sqlite_registry, "a-jkt", tmp_path / "one", settings=settings(), command=fake({}))
    two = Controller(sqlite_registry, "a-sgp", tmp_path / "two", settings=settings(), command=fake({}))
    one.claim()
    two.claim()
    first = until(one, alice, "hop", lambda d: d.actual_state == "running")
    alice.move("hop", "a-sgp")
    for _ in range(5):  # the old controller is alive: the new one waits for it
        two.reconcile_once()
    assert (alice.dagger("hop").pid, alice.dagger("hop").moving_from) == (first.pid, "a-jkt")
    stopped = until(one, alice, "hop", lambda d: d.actual_state == "stopped" and d.moving_from is None)
    assert stopped.last_exit_code == 0 and not pid_alive(first.pid)
    second = until(two, alice, "hop", lambda d: d.actual_state == "running")
    assert second.checkpoint == first.checkpoint and second.pid != first.pid  # the same checkpoint folder
    starts = (Path(first.checkpoint) / "starts.txt").read_text().splitlines()
    assert [line.split()[0] for line in starts] == [str(first.pid), str(second.pid)]
    one.reconcile_once()
    assert pid_alive(second.pid) and alice.dagger("hop").cluster == "a-sgp"  # the old one leaves it alone
    two.stop_all()


def test_failover_takes_over_when_the_controller_is_gone(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice, adam = ControlPlane(sqlite_registry, "alice"), ControlPlane(sqlite_registry, "adam")
    adam.set_failover("a-jkt", "a-sgp")
    alice.create("a-jkt", bookings_spec("orphan"), deploy=True)
    alice.create("a-jkt", bookings_spec("idle"))
    one = Controller(sqlite_registry, "a-jkt", tmp_path / "one", settings=settings(), command=fake({}))
    two = Controller(
        sqlite_registry, "a-sgp", tmp_path / "two", settings=settings(failover_after_s=5), command=fake({})
    )
    one.claim()
    two.claim()
    first = until(one, alice, "orphan", lambda d: d.actual_state == "running")
    two.reconcile_once()
    assert alice.dagger("orphan").cluster == "a-jkt"  # a fresh heartbeat: no failover
    with sqlite_registry.session() as s:  # controller one dies (its dagger process lives on)
        c = s.query(Cluster).filter_by(name="a-jkt").one()
        c.controller_heartbeat = time.time() - 6
    second = until(two, alice, "orphan", lambda d: d.actual_state == "running" and d.pid != first.pid)
    assert not pid_alive(first.pid) and second.checkpoint == first.checkpoint and second.moving_from is None
    assert (alice.dagger("idle").cluster, alice.dagger("idle").desired_state) == ("a-jkt", "stopped")
    [entry] = alice.moves("orphan")
    assert (entry.user, entry.action, entry.details["from"], entry.details["to"]) == (
        "controller:a-sgp",
        "failover",
        "a-jkt",
        "a-sgp",
    )
    two.stop_all()


def test_an_unreachable_checkpoint_is_not_started_afresh(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    view = alice.create("a-jkt", bookings_spec("far"))
    elsewhere = tmp_path / "not-mounted" / f"{view.id}-far" / "checkpoint-1"
    with sqlite_registry.session() as s:
        st = s.get(DaggerStatus, view.id)
        assert st is not None
        st.checkpoint, st.actual_state = str(elsewhere), "stopped"
    alice.move("far", "a-sgp")
    alice.deploy("far")
    two = Controller(sqlite_registry, "a-sgp", tmp_path / "two", settings=settings(), command=fake({}))
    failed = until(two, alice, "far", lambda d: d.actual_state == "failed")
    assert failed.pid is None and "not reachable from cluster a-sgp" in (failed.last_error or "")
    assert "NOT started" in (failed.last_error or "") and not elsewhere.exists()


def test_an_older_registry_gets_the_new_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Registry(url)
    with old.engine.begin() as conn:  # a registry written before failover existed
        conn.exec_driver_sql("ALTER TABLE daggers DROP COLUMN moving_from_id")
        conn.exec_driver_sql("ALTER TABLE clusters DROP COLUMN failover_to_id")
    old.close()
    registry = Registry(url)
    seed(registry)
    ControlPlane(registry, "alice").create("a-jkt", bookings_spec("old"))
    assert ControlPlane(registry, "alice").move("old", "a-sgp").moving_from == "a-jkt"
    registry.close()
