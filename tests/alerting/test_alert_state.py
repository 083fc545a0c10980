"""Alert state semantics (unit tests with a fake InfluxDB reader and a recording channel; the store is a
real SQLite file): pending periods, OK→WARN→CRIT and back, one alert per group, flapping, no-data
handling, D-7 comparisons, deadman groups, routing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from alerting.config import parse_config
from alerting.engine import AlertEngine
from alerting.routing import Route, Router
from alerting.rules import FlappingSpec
from alerting.state import AlertState, Level, decide, flap_share, step
from alerting.store import AlertStore
from tests.alerting.alert_setup import FakeReader, Recorder

T = 1772445600.0  # 2026-03-02T10:00:00Z
W, C, O = Level.WARN, Level.CRIT, Level.OK  # noqa: E741


def make_engine(
    tmp_path: Path, rules: str, *, extra: str = "", tag: str = "city"
) -> tuple[AlertEngine, FakeReader, Recorder]:
    config = parse_config(f"""channels:
  rec: {{type: webhook, url: "http://127.0.0.1:9/unused"}}
default_channels: [rec]
{extra}rules:
{rules}""")
    reader, rec = FakeReader(tag), Recorder("rec")
    engine = AlertEngine(
        config,
        state_dir=tmp_path,
        store=AlertStore(f"sqlite:///{tmp_path}/a.db"),
        reader=reader,
        notifiers={"rec": rec},
    )  # type: ignore[arg-type]
    return engine, reader, rec


def sent(rec: Recorder) -> list[tuple[str, str, str, float | None]]:
    return [(n.tags.get("city", ""), n.previous_level, n.level, n.value) for n in rec.got]


def test_step_pending_escalation_and_recovery() -> None:
    s = AlertState("fp", "r")
    levels = []
    for i, raw in enumerate([W, W, W, C, C, C, W, O, C]):
        step(s, raw, T + 60 * i, 120.0, None)
        levels.append(s.level)
    # WARN after 2 min of WARN or worse; CRIT after 2 min of CRIT; down at once; a new CRIT waits again
    assert levels == [O, O, W, W, W, C, W, O, O]
    assert s.pending and s.raw_level == C


def test_flapping_holds_notifications_and_releases_the_final_level() -> None:
    spec = FlappingSpec(low=0.25, high=0.5, history=11)
    s = AlertState("fp", "r")
    events = []
    for i, raw in enumerate([C, O] * 5 + [C] * 12):
        result = step(s, raw, T + i, 0.0, spec)
        d = decide(s, silenced=False)
        if result.flapping:
            events.append((i, f"flapping {result.flapping}"))
        if d is not None and d.notify:
            events.append((i, f"notify {d.level.name}"))
            s.notified_level = s.level
    assert flap_share([0, 1] * 5 + [0]) == pytest.approx(1.0)
    assert flap_share([0] * 11) == 0.0
    # the first changes are notified; at the fifth change in the 11-level ring the alert flaps (55.6% > 50%) and
    # its CRIT is held back; once it stayed CRIT long enough (16.4% < 25%) flapping stops and CRIT is sent once
    assert events == [
        (0, "notify CRIT"),
        (1, "notify OK"),
        (2, "notify CRIT"),
        (3, "notify OK"),
        (4, "flapping start"),
        (18, "flapping stop"),
        (18, "notify CRIT"),
    ]


def test_one_alert_per_group_and_state_changes_only(tmp_path: Path) -> None:
    engine, reader, rec = make_engine(
        tmp_path,
        """  - name: spike
    team: bookings
    measurement: m
    field: n
    aggregate: sum
    group_by: [city]
    window: 1m
    warn: {above: 10}
    crit: {above: 20}
    message: "{city}: {n:.0f} ({condition}) was {previous_level}"
""",
    )
    series = {"A": [5, 15, 25, 25, 15, 5, 5], "B": [1, 1, 1, 30, 30, 1, 1]}
    for i in range(7):
        reader.data[T + 60 * i] = {g: v[i] for g, v in series.items()}
        engine.evaluate_rule("spike", T + 60 * i)
        engine.evaluate_rule("spike", T + 60 * i)  # twice: nothing more is sent
    assert sent(rec) == [
        ("A", "OK", "WARN", 15),
        ("A", "WARN", "CRIT", 25),
        ("B", "OK", "CRIT", 30),
        ("A", "CRIT", "WARN", 15),
        ("A", "WARN", "OK", 5),
        ("B", "CRIT", "OK", 1),
    ]
    assert [n.message for n in rec.got[:2]] == ["A: 15 (above 10) was OK", "A: 25 (above 20) was WARN"]
    assert rec.got[0].dedup_key == rec.got[1].dedup_key == rec.got[4].dedup_key != rec.got[2].dedup_key
    assert [n.status for n in rec.got] == ["firing", "firing", "firing", "firing", "resolved", "resolved"]
    assert rec.got[4].labels["severity"] == "warn" and rec.got[5].labels["severity"] == "crit"
    assert len({n.id for n in rec.got}) == 6
    engine.close()


def test_no_data_keep_and_ok(tmp_path: Path) -> None:
    rules = ""
    for name, mode in (("keep-rule", "keep"), ("ok-rule", "ok"), ("crit-rule", "crit")):
        rules += f"""  - name: {name}
    team: t
    measurement: m
    field: n
    aggregate: sum
    group_by: [city]
    window: 1m
    on_no_data: {mode}
    crit: {{above: 10}}
"""
    engine, reader, rec = make_engine(tmp_path, rules)
    reader.data[T] = {"A": 50}
    for i in range(3):  # the group reports at T only
        for name in ("keep-rule", "ok-rule", "crit-rule"):
            engine.evaluate_rule(name, T + 60 * i)
    assert [(n.rule, n.status) for n in rec.got] == [
        ("keep-rule", "firing"),
        ("ok-rule", "firing"),
        ("crit-rule", "firing"),
        ("ok-rule", "resolved"),
    ]
    assert {s.rule: s.level for s in engine.store.states()} == {"keep-rule": C, "ok-rule": O, "crit-rule": C}
    engine.close()


def test_change_versus_last_week(tmp_path: Path) -> None:
    engine, reader, rec = make_engine(
        tmp_path,
        """  - name: drop
    team: t
    measurement: m
    field: n
    aggregate: sum
    group_by: [city]
    window: 1m
    crit: {versus: D-7, below: -50}
    message: "{city}: {value:.0f}, {change_pct:+.0f}% vs {past_value:.0f}"
""",
    )
    week = 7 * 86400
    reader.data[T - week] = {"A": 100, "B": 100}
    reader.data[T] = {"A": 40, "B": 60, "C": 5}  # C has no past: its change is unknown and never fires
    report = engine.evaluate_rule("drop", T)
    assert {g.tags["city"]: (g.level, g.value) for g in report.groups} == {
        "A": (C, 40),
        "B": (O, 60),
        "C": (O, 5),
    }
    assert [n.message for n in rec.got] == ["A: 40, -60% vs 100"]
    assert len(reader.queries) == 2 and "'2026-02-23T10:00:00Z'" in reader.queries[1]
    engine.close()


def test_deadman_groups(tmp_path: Path) -> None:
    engine, reader, rec = make_engine(
        tmp_path,
        """  - name: silent
    kind: deadman
    team: t
    measurement: m
    group_by: [city]
    period: 5m
    lookback: 1h
    dagger: my-dagger
""",
    )
    for i in range(0, 30):
        reader.data[T + 60 * i] = {"A": 1, "B": 1} if i < 10 else {"A": 1}  # B stops after 10 minutes
    fired = {}
    for minute in (5, 12, 14, 15, 16, 20):
        report = engine.evaluate_rule("silent", T + 60 * minute)
        fired[minute] = {g.tags["city"]: g.level for g in report.groups}
    assert fired[12] == {"A": O, "B": O}
    assert fired[14] == {"A": O, "B": C}  # B's last point was T+9m: more than 5 minutes before T+14m+
    assert [(n.tags, n.level, n.labels["dagger"]) for n in rec.got] == [({"city": "B"}, "CRIT", "my-dagger")]
    assert rec.got[0].message == "silent is CRIT: no data from m in city=B (no data for 5m)"
    engine.close()


def test_router() -> None:
    from alerting.matchers import parse_matchers

    router = Router(
        [
            Route(parse_matchers(["severity=crit"]), ("pd",), cont=True),
            Route(parse_matchers(["team=bookings"]), ("slack-b", "pd")),
            Route(parse_matchers(["team=~.+"]), ("slack-all",)),
        ],
        default=("fallback",),
    )
    assert router.channels({"team": "bookings", "severity": "crit"}) == ["pd", "slack-b"]
    assert router.channels({"team": "bookings", "severity": "warn"}) == ["slack-b", "pd"]
    assert router.channels({"team": "x", "severity": "warn"}) == ["slack-all"]
    assert router.channels({"severity": "warn"}) == ["fallback"]


def test_evaluation_is_atomic_with_its_notifications(tmp_path: Path) -> None:
    """The state and the notification it queues are written together: a store failure loses both, so the
    next evaluation queues the notification again (nothing lost, nothing twice)."""
    engine, reader, rec = make_engine(
        tmp_path,
        """  - name: spike
    team: t
    measurement: m
    field: n
    aggregate: sum
    window: 1m
    crit: {above: 1}
""",
    )
    reader.data[T] = {"A": 5}
    original = engine.store.commit_evaluation

    def broken(*args: object, **kw: object) -> int:
        from alerting.errors import StoreError

        raise StoreError("disk full")

    engine.store.commit_evaluation = broken  # type: ignore[method-assign]
    from alerting.errors import StoreError

    with pytest.raises(StoreError):
        engine.evaluate_rule("spike", T)
    assert engine.store.states() == [] and engine.store.outbox() == [] and rec.got == []
    engine.store.commit_evaluation = original  # type: ignore[method-assign]
    engine.evaluate_rule("spike", T + 1)
    assert [n.status for n in rec.got] == ["firing"]
    assert datetime.fromtimestamp(rec.got[0].at, UTC).second == 1
    engine.close()


def test_a_removed_rule_resolves_its_alerts(tmp_path: Path) -> None:
    engine, reader, rec = make_engine(
        tmp_path,
        """  - name: spike
    team: t
    measurement: m
    field: n
    aggregate: sum
    group_by: [city]
    window: 1m
    crit: {above: 1}
  - name: other
    team: t
    measurement: m
    field: n
    every: 1h
    crit: {above: 100}
""",
    )
    reader.data[T] = {"A": 5, "B": 0}
    engine.evaluate_rule("spike", T)
    engine.close()
    later, _, rec2 = make_engine(
        tmp_path,
        """  - name: other
    team: t
    measurement: m
    field: n
    every: 1h
    crit: {above: 100}
""",
    )
    try:
        later.start()
        later.dispatch()
        assert later.store.states() == []
    finally:
        later.close()
    assert [(n.rule, n.status, n.tags) for n in rec.got] == [("spike", "firing", {"city": "A"})]
    assert [(n.rule, n.status, n.tags, n.dedup_key) for n in rec2.got] == [
        ("spike", "resolved", {"city": "A"}, rec.got[0].dedup_key)
    ]
    assert rec2.got[0].message == "spike was removed from the configuration: its alert is resolved"
