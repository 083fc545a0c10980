"""The hint that a team's shared daggers could run as one query (``isolation: fused``): only daggers of
the same cluster that are to run, read the same stream alike (same window, watermark delay and trigger;
the SQL may differ) and are not dedicated; ``dagger create`` and ``dagger show`` say it, ``--json``
lists them."""

from __future__ import annotations

import json

from typer import Typer
from typer.testing import CliRunner

from job.cli.control import register
from job.control import ControlPlane, Registry
from job.control.fusing import Candidate, fusible_with, fusion_hint, isolation_of
from tests.job.control.control_seed import bookings_spec, seed

SUM_SQL = "sum(fare_idr) AS fares,"
ENV = {"DAGGERS_BOOTSTRAP": "127.0.0.1:9", "DAGGERS_INFLUX": "http://127.0.0.1:9"}


def _spec(name: str, *, topic: str = "booking-log", sql: str = "", extra: str = "") -> str:
    text = bookings_spec(name, topic=topic)
    if sql:
        text = text.replace("count(1) AS bookings,", sql)
    return text + extra


def test_alike_daggers_of_a_cluster_are_named_and_no_others(registry: Registry) -> None:
    seed(registry)
    alice = ControlPlane(registry, "alice")
    bob = ControlPlane(registry, "bob")
    alice.create("a-jkt", _spec("counts"), deploy=True)
    alice.create("a-jkt", _spec("fares", sql=SUM_SQL), deploy=True)  # other SQL, same stream, same window
    alice.create("a-jkt", _spec("fused-fares", sql=SUM_SQL, extra="isolation: fused\n"), deploy=True)
    alice.create("a-jkt", _spec("stopped"))  # not to run
    alice.create("a-jkt", _spec("own-app", extra="isolation: dedicated\n"), deploy=True)
    alice.create("a-jkt", _spec("other-topic", topic="booking-log-2"), deploy=True)
    alice.create(
        "a-jkt",
        _spec("slower", extra="").replace("trigger_interval_s: 1", "trigger_interval_s: 5"),
        deploy=True,
    )
    alice.create("a-jkt", _spec("hourly").replace("INTERVAL '60' SECOND", "INTERVAL '1' HOUR"), deploy=True)
    alice.create("a-sgp", _spec("elsewhere"), deploy=True)  # another cluster
    bob.create("b-jkt", _spec("counts-b"), deploy=True)  # another team's cluster

    assert alice.fusible_with("counts") == ("shared", ["team-a/fares", "team-a/fused-fares"])
    assert alice.fusible_with("fares") == ("shared", ["team-a/counts", "team-a/fused-fares"])
    assert alice.fusible_with("own-app") == ("dedicated", [])
    assert alice.fusible_with("stopped") == (
        "shared",
        ["team-a/counts", "team-a/fares", "team-a/fused-fares"],
    )
    assert alice.fusible_with("hourly") == ("shared", [])
    assert bob.fusible_with("counts-b") == ("shared", [])


def test_a_spec_that_does_not_read_has_no_isolation_and_no_partners(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broken = Candidate("team-a/broken", "name: broken\nstreams: [", {})
    good = Candidate("team-a/counts", _spec("counts"), ENV)
    assert isolation_of(broken) == "" and isolation_of(good) == "shared"
    assert fusible_with(broken, [good]) == []
    assert fusible_with(good, [broken]) == []


def test_the_hint_is_for_shared_daggers_only() -> None:
    assert fusion_hint("a-jkt", "shared", []) is None
    assert fusion_hint("a-jkt", "fused", ["team-a/fares"]) is None
    assert fusion_hint("a-jkt", "shared", ["team-a/fares"]) == (
        "it reads its stream as 1 other dagger of a-jkt does (team-a/fares); with isolation: fused in their "
        "specs they run as one query, one read and one micro-batch for all, which many light daggers on a "
        "small host need to keep their latency (README: Fused daggers)"
    )
    many = fusion_hint("a-jkt", "shared", [f"t/d{i}" for i in range(7)])
    assert (
        many is not None
        and "as 7 other daggers of a-jkt do (t/d0, t/d1, t/d2, t/d3, t/d4 and 2 more)" in many
    )


def test_create_and_show_say_it(registry: Registry, tmp_path) -> None:  # type: ignore[no-untyped-def]
    seed(registry)
    app = Typer()
    register(app)

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--registry", registry.url], env={"DAGGERS_USER": "alice"})
        assert result.exit_code == 0, result.output
        return result.output

    first, second = tmp_path / "counts.yaml", tmp_path / "fares.yaml"
    first.write_text(_spec("counts"))
    second.write_text(_spec("fares", sql=SUM_SQL))
    assert "hint" not in run("dagger", "create", str(first), "--cluster", "a-jkt", "--deploy")
    created = run("dagger", "create", str(second), "--cluster", "a-jkt", "--deploy")
    assert "hint: it reads its stream as 1 other dagger of a-jkt does (team-a/counts)" in " ".join(
        created.split()
    )
    shown = run("dagger", "show", "counts")
    assert "hint: it reads its stream as 1 other dagger of a-jkt does (team-a/fares)" in " ".join(
        shown.split()
    )
    data = json.loads(run("dagger", "show", "counts", "--json"))
    assert (data["isolation"], data["fusible_with"]) == ("shared", ["team-a/fares"])
