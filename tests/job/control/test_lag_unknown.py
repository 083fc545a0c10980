"""A broker's end offset below a dagger's position is no lag at all: the broker lost records or answered wrongly
(tansu's ListOffsets "latest"). The lag is unknown then, never 0 and never "idle": the model says why, the
controller records it, and every surface (the plane's views for the CLI and the console, /metrics) follows.
The numbers the engine needs between two batches of one query stay as they were."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.health_model import RUNNING, DaggerFacts, dagger_health
from job.control.lag import LagUnknown, dagger_lag
from job.control.models import DaggerStatus
from job.query.offset_log import behind_reason, ends_behind, lag_of
from tests.helpers import committed_checkpoint
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import FAKE, settings, until

NOW = 1_000_000.0
WHY = "the broker's end offset 120 of orders/0 is behind the dagger's position 500: records lost or a wrong answer"


def test_ends_behind_names_each_partition_below_the_position() -> None:
    committed = {"orders": {"0": 500, "1": 40, "10": 9}, "old": {"0": 7}}
    ends = {"orders": {"0": 120, "1": 50, "2": 30, "10": 3}}
    assert ends_behind(committed, ends) == [("orders", "0", 120, 500), ("orders", "10", 3, 9)]
    assert behind_reason(ends_behind(committed, ends)) == (
        "the broker's end offset 120 of orders/0 is behind the dagger's position 500 (and 1 more partition): "
        "records lost or a wrong answer"
    )
    assert behind_reason([("orders", "0", 120, 500)]) == WHY
    # between two batches of one query a partition read further counts 0 (the engine's counts rely on it)
    assert lag_of(committed, ends) == 10 + 30


def _facts(**status: object) -> DaggerFacts:
    progress = {"updated_at": NOW - 1, "batch_at": NOW - 30, "input_rows": 5000, "batch_duration_ms": 900}
    row = {"actual_state": "running", "started_at": NOW - 600, "progress": progress, **status}
    return DaggerFacts.of("running", row, heartbeat=NOW - 1)


def test_the_model_says_the_lag_is_unknown_and_why() -> None:
    """A status row whose lag read found the ends behind: running, "lag unknown: …", no lag figure; the same
    dagger with a lag of 0 read a moment ago is idle."""
    h = dagger_health(_facts(lag=None, lag_at=NOW - 40, lag_unknown=WHY), NOW)
    assert (h.state, h.reason, h.lag, h.lag_unknown) == (RUNNING, f"lag unknown: {WHY}", None, WHY)
    assert h.to_dict()["lag_unknown"] == WHY
    # a stale lag left in the row (a controller of an older version) is not shown either
    assert dagger_health(_facts(lag=0, lag_at=NOW - 2, lag_unknown=WHY), NOW).lag is None
    idle = dagger_health(_facts(lag=0, lag_at=NOW - 2), NOW)
    assert (idle.state, idle.reason, idle.lag_unknown) == (RUNNING, "idle: nothing new to read", None)


def test_the_platform_alerts_source_says_the_lag_is_unknown(tmp_path: Path) -> None:
    """The alert engine's checkpoint source (its end offsets given): no consumer lag, and why, never 0."""
    from alerting.health import CheckpointHealthSource, WatchedDagger

    checkpoint = committed_checkpoint(tmp_path / "cp", {"orders": {"0": 500}})
    (checkpoint / "status.json").write_text(
        json.dumps({"state": "running", "updated_at": NOW, "input_rows": 9})
    )
    ends = {"orders": {"0": 120}}
    source = CheckpointHealthSource(
        [WatchedDagger("d", checkpoint, "t", [("127.0.0.1:9", ["orders"], {})])],
        end_offsets=lambda bootstrap, topics, config: ends,
    )
    (h,) = source.daggers()
    assert (h.consumer_lag, h.error) == (None, f"consumer lag unknown: {WHY}")
    ends["orders"]["0"] = 530
    assert source.daggers()[0].consumer_lag == 30


def _fill(bootstrap: str, topic: str, n: int) -> None:
    from job.produce.producer import ensure_topic

    ensure_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, f"event {i}".encode(), partition=0)
    assert producer.flush(30) == 0


@pytest.mark.integration  # its broker fixture is asked for by name
@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_a_checkpoint_ahead_of_the_broker_is_lag_unknown(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """120 records on the broker, a dagger whose checkpoint is at 500: the lag read raises LagUnknown with the
    partition, both offsets and the causes (it said 0 before); at 100 it is 20."""
    bootstrap: str = request.getfixturevalue(f"{kind}_broker")
    topic = f"lag-behind-{kind}-{tmp_path.name[-12:].replace('_', '-')}"
    _fill(bootstrap, topic, 120)
    streams = [(bootstrap, [topic], {})]
    with pytest.raises(LagUnknown) as info:
        dagger_lag(committed_checkpoint(tmp_path / "ahead", {topic: {"0": 500}}), streams)
    assert info.value.message == WHY.replace("orders", topic)
    assert dagger_lag(committed_checkpoint(tmp_path / "behind", {topic: {"0": 100}}), streams) == 20


def _status(registry: Registry) -> DaggerStatus:
    with registry.session() as s:
        st = s.scalars(select(DaggerStatus)).one()
        s.expunge(st)
        return st


def test_the_controller_records_an_unknown_lag_and_the_plane_shows_it(
    tansu_broker: str, tmp_path: Path
) -> None:
    """A running dagger (fake_dagger.py) whose checkpoint is at 500 of a partition that holds 120: the
    controller's own lag read (a real broker) records no lag and why; the plane's view (what the CLI and the
    console show) says "lag unknown: …" with no lag figure; a read that works again clears it."""
    topic = "booking-log"
    _fill(tansu_broker, topic, 120)
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry, kafka=tansu_broker)
    ctl = Controller(
        registry,
        "a-jkt",
        tmp_path / "state",
        settings=settings(lag_interval_s=0.2),
        command=lambda spec, state, master: [sys.executable, str(FAKE), str(spec), "run"],
    )
    ctl.claim()
    alice = ControlPlane(registry, "alice")
    try:
        alice.create("a-jkt", bookings_spec("ahead"), deploy=True)
        until(ctl, alice, "ahead", lambda d: d.actual_state == "running")
        checkpoint = Path(str(_status(registry).checkpoint))
        committed_checkpoint(checkpoint, {topic: {"0": 500}})
        why = WHY.replace("orders", topic)
        until(ctl, alice, "ahead", lambda d: _status(registry).lag_unknown is not None, timeout=120)
        st = _status(registry)
        assert (st.lag, st.lag_unknown, st.lag_error, st.lag_error_at) == (None, why, None, None)
        view = alice.dagger("ahead")
        assert (view.state, view.health["reason"], view.health["lag"], view.lag) == (
            RUNNING,
            f"lag unknown: {why}",
            None,
            None,
        )
        committed_checkpoint(checkpoint, {topic: {"0": 100}})
        until(ctl, alice, "ahead", lambda d: _status(registry).lag == 20, timeout=120)
        assert _status(registry).lag_unknown is None
    finally:
        alice.stop("ahead")
        until(ctl, alice, "ahead", lambda d: d.actual_state in ("stopped", "failed"))
        registry.close()
