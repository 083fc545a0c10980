"""The control plane's registry and operations, on SQLite and on a real PostgreSQL server:
roles and team isolation (enforced in the API), versions, diff, rollback, audit, desired state."""

from __future__ import annotations

import pytest

from job.control import (
    ConflictError,
    ControlError,
    ControlPlane,
    NotFoundError,
    PermissionDeniedError,
    Registry,
)
from job.control.models import AuditEntry
from job.errors import SpecError
from tests.job.control.control_seed import bookings_spec, seed


def test_each_user_sees_only_their_teams(registry: Registry) -> None:
    root = seed(registry)
    alice, bob = ControlPlane(registry, "alice"), ControlPlane(registry, "bob")
    a = alice.create("a-jkt", bookings_spec("a-bookings"))
    bob.create("b-jkt", bookings_spec("b-bookings"))
    assert (a.ref, a.actual_state, a.desired_state, a.current_version) == (
        "team-a/a-bookings",
        "created",
        "stopped",
        1,
    )
    assert [c.name for c in alice.clusters()] == ["a-jkt", "a-sgp"]
    assert [(c.datacentre, c.name) for c in alice.clusters()] == [("jkt", "a-jkt"), ("sgp", "a-sgp")]
    assert [c.name for c in bob.clusters()] == ["b-jkt"]
    assert [c.name for c in root.clusters()] == ["a-jkt", "b-jkt", "a-sgp"]
    assert [d.ref for d in alice.daggers()] == ["team-a/a-bookings"]
    assert [d.ref for d in bob.daggers()] == ["team-b/b-bookings"]
    assert [d.ref for d in root.daggers()] == ["team-a/a-bookings", "team-b/b-bookings"]
    assert {c.name: c.daggers_total for c in root.clusters()} == {"a-jkt": 1, "a-sgp": 0, "b-jkt": 1}
    assert alice.whoami() == {"user": "alice", "superuser": False, "teams": {"team-a": "editor"}}


def test_team_b_cannot_see_preview_edit_or_stop_team_a(registry: Registry) -> None:
    seed(registry)
    alice, bob = ControlPlane(registry, "alice"), ControlPlane(registry, "bob")
    alice.create("a-jkt", bookings_spec("secret-sauce"), deploy=True)
    attempts = {
        "see": lambda ref: bob.dagger(ref),
        "preview": lambda ref: bob.preview(ref),
        "edit": lambda ref: bob.edit(ref, bookings_spec("secret-sauce", measurement="stolen")),
        "stop": lambda ref: bob.stop(ref),
        "history": lambda ref: bob.history(ref),
        "delete": lambda ref: bob.delete(ref),
    }
    for attempt in attempts.values():
        for ref in ("team-a/secret-sauce", "secret-sauce"):
            with pytest.raises(NotFoundError, match="no dagger .* in your teams"):
                attempt(ref)
    with pytest.raises(NotFoundError, match="no cluster 'a-jkt' in your teams"):
        bob.create("a-jkt", bookings_spec("intruder"))
    with pytest.raises(NotFoundError):
        bob.daggers(cluster="a-jkt")
    with pytest.raises(NotFoundError):
        bob.preview_text("a-jkt", bookings_spec("x"))
    assert bob.daggers(search="secret") == []
    # nothing changed, and every refused attempt is on record with who and when
    d = alice.dagger("secret-sauce")
    assert (d.current_version, d.desired_state, d.actual_state) == (1, "running", "pending")
    with registry.session() as s:
        denied = [(a.user, a.action, a.allowed) for a in s.query(AuditEntry).filter_by(allowed=False)]
    assert ("bob", "see", False) in denied and ("bob", "stop", False) in denied
    assert ("bob", "preview", False) in denied and ("bob", "edit", False) in denied
    assert len(denied) == len(attempts) * 2 + 3
    # bob does not see team-a's audit entries either
    assert all(e.team in (None, "team-b") or e.user == "bob" for e in bob.audit())


def test_roles_viewer_editor_admin(registry: Registry) -> None:
    seed(registry)
    alice, vera, adam = (ControlPlane(registry, u) for u in ("alice", "vera", "adam"))
    alice.create("a-jkt", bookings_spec("a-one"))
    assert vera.dagger("a-one").ref == "team-a/a-one"
    assert [v.version for v in vera.history("a-one")] == [1]
    for action in (vera.deploy, vera.stop, vera.restart):
        with pytest.raises(
            PermissionDeniedError, match="needs the editor role in team 'team-a' \\(you have viewer\\)"
        ):
            action("a-one")
    with pytest.raises(PermissionDeniedError):
        vera.create("a-jkt", bookings_spec("a-two"))
    with pytest.raises(PermissionDeniedError, match="needs the admin role"):
        alice.delete("a-one")
    with pytest.raises(PermissionDeniedError, match="only a superuser"):
        adam.add_team("team-c")
    adam.set_member("team-a", "bob", "viewer")  # a team admin manages the team's members
    assert ControlPlane(registry, "bob").dagger("team-a/a-one").name == "a-one"
    with pytest.raises(PermissionDeniedError):
        alice.set_member("team-a", "bob", "admin")
    with pytest.raises(NotFoundError, match="unknown user 'mallory'"):
        ControlPlane(registry, "mallory").daggers()
    deleted = adam.delete("a-one")
    assert deleted.actual_state == "deleted"
    assert alice.daggers() == []
    again = alice.create("a-jkt", bookings_spec("a-one"))  # a deleted dagger frees its name
    assert again.id != deleted.id and again.current_version == 1


def test_versions_diff_compatibility_and_rollback(registry: Registry) -> None:
    seed(registry)
    alice = ControlPlane(registry, "alice")
    v1 = bookings_spec("counts")
    alice.create("a-jkt", v1, deploy=True, comment="first")
    v2 = v1.replace("trigger_interval_s: 1", "trigger_interval_s: 2").replace(
        "measurement: bookings", "measurement: bookings2"
    )
    r2 = alice.edit("counts", v2, expected_version=1, comment="slower trigger")
    assert (r2.version, r2.checkpoint_epoch, r2.compatibility.resume, r2.redeploys) == (2, 1, True, True)
    assert r2.compatibility.notes == ["the sinks changed: the next batches go to the new sinks"]
    with pytest.raises(ConflictError, match="is at version 2, not 1"):
        alice.edit("counts", v2.replace("trigger_interval_s: 2", "trigger_interval_s: 3"), expected_version=1)
    with pytest.raises(ConflictError, match="nothing to change"):
        alice.edit("counts", v2)
    v3 = v2.replace("count(1) AS bookings", "sum(fare_idr) AS fares")
    with pytest.raises(
        ConflictError, match="cannot resume from the checkpoint: the aggregation changed"
    ) as info:
        alice.edit("counts", v3)
    assert "--fresh-start" in (info.value.hint or "")
    assert alice.dagger("counts").current_version == 2
    r3 = alice.edit("counts", v3, allow_fresh_start=True)
    assert (r3.version, r3.checkpoint_epoch, r3.compatibility.resume) == (3, 2, False)
    with pytest.raises(SpecError, match="a dagger keeps its name"):
        alice.edit("counts", v3.replace("name: counts", "name: other").replace("fares", "fares2"))
    assert alice.diff("counts", 1, 2) == (
        "--- team-a/counts v1\n+++ team-a/counts v2\n"
        "@@ -15,9 +15,9 @@\n"
        "   WHERE status = 'COMPLETED'\n"
        "   GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id\n"
        " watermark_delay_ms: 10000\n"
        "-trigger_interval_s: 1\n"
        "+trigger_interval_s: 2\n"
        " sink:\n"
        "   type: influx\n"
        "   url: ${DAGGERS_INFLUX}\n"
        "   database: daggers\n"
        "-  measurement: bookings\n"
        "+  measurement: bookings2\n"
    )
    assert alice.diff("counts", 2, 2) == ""
    r4 = alice.rollback("counts", 2, allow_fresh_start=True)
    assert (r4.version, r4.checkpoint_epoch, r4.compatibility.resume) == (4, 3, False)
    history = alice.history("counts")
    assert [(v.version, v.checkpoint_epoch, v.comment) for v in history] == [
        (1, 1, "first"),
        (2, 1, "slower trigger"),
        (3, 2, ""),
        (4, 3, "rollback to v2"),
    ]
    assert history[3].spec_text == v2
    actions = [(e.user, e.action, e.details.get("version")) for e in reversed(alice.audit(target="counts"))]
    assert actions == [
        ("alice", "create", 1),
        ("alice", "deploy", 1),
        ("alice", "edit", 2),
        ("alice", "edit", 3),
        ("alice", "rollback", 4),
    ]
    assert all(e.at > 0 for e in alice.audit())


def test_desired_state_operations(registry: Registry) -> None:
    seed(registry)
    alice = ControlPlane(registry, "alice")
    alice.create("a-jkt", bookings_spec("states"))
    assert alice.deploy("states").desired_state == "running"
    assert alice.dagger("states").actual_state == "pending"
    assert alice.stop("states").desired_state == "stopped"
    restarted = alice.restart("states")
    assert restarted.desired_state == "running"
    with registry.session() as s:
        from job.control.models import Dagger

        assert s.query(Dagger).filter_by(name="states").one().restart_generation == 1


def test_a_clear_text_secret_is_refused_and_a_reference_accepted(registry: Registry) -> None:
    seed(registry)
    alice = ControlPlane(registry, "alice")
    spec = bookings_spec("secrets")
    with pytest.raises(SpecError, match=r"sink.password: a secret in clear text would be stored"):
        alice.create("a-jkt", spec + "  username: u\n  password: hunter2\n")
    view = alice.create("a-jkt", spec + "  username: u\n  password: ${INFLUX_PASSWORD}\n")
    assert "hunter2" not in alice.version(view.ref).spec_text
    pg = spec.replace(
        "sink:\n", "sinks:\n- type: postgres\n  dsn: postgresql://app:pw@db:5432/x\n  table: t\n-\n"
    )
    with pytest.raises(SpecError, match=r"sinks\[0\].dsn: a secret in clear text"):
        alice.create("a-jkt", pg.replace("name: secrets", "name: secrets-pg"))


def test_validation_names_line_and_column_in_the_sql(registry: Registry) -> None:
    seed(registry)
    alice = ControlPlane(registry, "alice")
    ok = alice.validate("a-jkt", bookings_spec("valid"))
    assert (
        ok.ok and ok.columns == {"data_stream": ["city_id", "status"]} and ok.window == ["60 seconds", None]
    )
    bad = alice.validate(
        "a-jkt",
        bookings_spec("valid").replace("count(1) AS bookings", "count(1) AS bookings,\n         cty AS x"),
    )
    assert (bad.ok, bad.title, bad.message, bad.line, bad.col) == (
        False,
        "Dagger SQL error",
        "unknown column cty",
        3,
        8,
    )
    spec_err = alice.validate("a-jkt", bookings_spec("Bad_Name"))
    assert not spec_err.ok and spec_err.title == "Invalid dagger spec" and "name" in spec_err.message


def test_publish_to_kafka_adds_a_sink_as_a_resumable_version(registry: Registry) -> None:
    seed(registry, kafka="127.0.0.1:9092")
    alice, bob = ControlPlane(registry, "alice"), ControlPlane(registry, "bob")
    alice.create("a-jkt", bookings_spec("pub"))
    with pytest.raises(NotFoundError):
        bob.publish_to_kafka("team-a/pub", "stolen")
    result = alice.publish_to_kafka("pub", "bookings-out")
    assert (result.version, result.checkpoint_epoch, result.compatibility.resume) == (2, 1, True)
    from job.control.specs import raw_spec

    sinks = raw_spec(alice.version("pub", 2).spec_text)["sinks"]
    assert sinks[1] == {
        "type": "kafka",
        "bootstrap_servers": "127.0.0.1:9092",
        "topic": "bookings-out",
        "format": "json",
        "create_topic": True,
    }
    assert sinks[0]["type"] == "influx"
    with pytest.raises(ControlError, match="already publishes to Kafka topic 'bookings-out'"):
        alice.publish_to_kafka("pub", "bookings-out")
    with pytest.raises(ControlError, match="not a valid Kafka topic"):
        alice.publish_to_kafka("pub", "bad topic")
    assert alice.dagger("pub").current_version == 2
    assert [e.action for e in alice.audit(target="pub")][0] == "publish"


def test_two_operators_editing_at_once_conflict(registry: Registry) -> None:
    seed(registry)
    alice, adam = ControlPlane(registry, "alice"), ControlPlane(registry, "adam")
    text = bookings_spec("shared")
    alice.create("a-jkt", text)
    seen_by_alice, seen_by_adam = (
        alice.dagger("shared").current_version,
        adam.dagger("shared").current_version,
    )
    adam.edit(
        "shared",
        text.replace("trigger_interval_s: 1", "trigger_interval_s: 4"),
        expected_version=seen_by_adam,
    )
    with pytest.raises(ConflictError, match="someone changed it meanwhile"):
        alice.edit(
            "shared",
            text.replace("trigger_interval_s: 1", "trigger_interval_s: 9"),
            expected_version=seen_by_alice,
        )
    assert [v.created_by for v in alice.history("shared")] == ["alice", "adam"]


def test_registry_urls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from job.control.registry import normalise_url

    assert normalise_url("postgresql://u:pw@h:5432/db") == "postgresql+psycopg://u:pw@h:5432/db"
    assert Registry(f"sqlite:///{tmp_path}/r.db").safe_url.endswith("/r.db")
    assert "pw" not in Registry("postgresql://u:pw@127.0.0.1:1/db", create=False).safe_url
    with pytest.raises(ControlError, match="not supported"):
        normalise_url("mysql://h/db")
