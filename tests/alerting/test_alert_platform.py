"""Platform alerts that need no rule: a dagger down or in a restart loop, consumer lag, bad-record rate and
sink failures. Read from a REAL dagger's checkpoint (status.json and Spark's offset log) and the REAL
broker's end offsets; restart loops and sink failures also from a fake health source."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from alerting.health import BAD, DOWN, LAG, RESTARTS, SINKS, DaggerHealth, DaggerHealthSource, read_status
from alerting.state import Level
from job.produce.generator import generate
from job.produce.producer import produce
from tests.alerting.alert_data import SHAPE, T0, DaggerOutput
from tests.alerting.alert_receivers import HttpReceiver
from tests.alerting.alert_setup import WEBHOOK_SECRET, channels_yaml, config_for, engine_for

OK, WARN, CRIT = Level.OK, Level.WARN, Level.CRIT
PLATFORM = """
default_channels: [webhook]
platform:
  team: data-platform
  daggers:
    - spec: {spec}
      team: bookings
  state_dir: {state}
  down_after: 10m
  consumer_lag: {{warn: 10, crit: 30}}
  bad_record_rate: {{warn: 0.01, crit: 0.05, min_records: 100}}
"""


def levels(reports) -> dict[str, tuple[Level, float | None]]:  # type: ignore[no-untyped-def]
    return {r.rule: (g.level, g.value) for r in reports for g in r.groups}


@pytest.mark.integration
def test_platform_alerts_from_a_real_dagger(
    bookings_output: DaggerOutput, tmp_path: Path, http_receiver: HttpReceiver
) -> None:
    http = http_receiver.up()
    config = config_for(
        bookings_output,
        tmp_path,
        PLATFORM.format(spec=bookings_output.spec_path, state=bookings_output.state_dir),
        channels=channels_yaml(http),
    )
    status = read_status(bookings_output.checkpoint)
    assert status is not None and status["state"] == "stopped"  # the run ended cleanly
    # A dagger killed by SIGKILL leaves its last status behind: "running", with no progress since.
    (bookings_output.checkpoint / "status.json").write_text(json.dumps({**status, "state": "running"}))
    updated = float(status["updated_at"])
    engine = engine_for(config, tmp_path)
    try:
        # right after the run: caught up, 60 s since its last progress, 25 bad records of 1021 (2.45%)
        first = levels(engine.evaluate_platform(at=updated + 60))
        good = sum(sum(c) for c in SHAPE.values()) + 1
        assert bookings_output.good_records == good == 996
        assert first == {
            DOWN: (OK, pytest.approx(60)),
            RESTARTS: (OK, 0.0),
            LAG: (OK, 0.0),
            BAD: (WARN, pytest.approx(25 / 1021)),
            SINKS: (OK, 0.0),
        }
        # 37 more bookings reach the topic while the dagger does not run; 11 minutes pass without progress
        produce(
            bookings_output.bootstrap,
            bookings_output.topic,
            generate("booking", 37, seed=77, start=T0 + timedelta(minutes=30), duration_s=10),
            progress=False,
        )
        second = levels(engine.evaluate_platform(at=updated + 660))
        assert second[LAG] == (CRIT, 37.0) and second[DOWN] == (CRIT, pytest.approx(660))
        assert BAD not in second  # no new records to judge: the alert keeps its level
        assert {s.rule: s.level for s in engine.firing()} == {DOWN: CRIT, LAG: CRIT, BAD: WARN}
    finally:
        engine.close()
    name = read_name(bookings_output.spec_path)
    hooks = [r.json for r in http.posts(WEBHOOK_SECRET)]
    assert [(h["rule"], h["level"], h["team"], h["tags"]) for h in hooks] == [
        (BAD, "WARN", "bookings", {"dagger": name}),
        (LAG, "CRIT", "bookings", {"dagger": name}),
        (DOWN, "CRIT", "bookings", {"dagger": name}),
    ]
    assert [h["message"] for h in hooks] == [
        f"dagger {name}: 25 of 1021 records did not decode (2.45%)",
        f"dagger {name} is 37 records behind its topics",
        f"dagger {name} reported no progress for 11m",
    ]
    assert hooks[0]["labels"]["kind"] == "platform"


def read_name(spec_path: Path) -> str:
    from job.spec import load_spec

    return load_spec(spec_path).name


class FakeHealth:
    """A health source the control plane could provide (here: whatever the test sets)."""

    def __init__(self) -> None:
        self.items: list[DaggerHealth] = []

    def daggers(self) -> list[DaggerHealth]:
        return list(self.items)


def test_restart_loop_sink_failures_and_failed_state(tmp_path: Path) -> None:
    from alerting.config import parse_config
    from alerting.engine import AlertEngine
    from alerting.store import AlertStore
    from tests.alerting.alert_setup import FakeReader, Recorder

    t = 1772445600.0
    config = parse_config("""channels:
  rec: {type: webhook, url: "http://127.0.0.1:9/x"}
default_channels: [rec]
platform:
  daggers: [unused.yaml]
  consumer_lag: null
""")
    health = FakeHealth()
    assert isinstance(health, DaggerHealthSource)
    rec = Recorder("rec")
    engine = AlertEngine(
        config,
        state_dir=tmp_path,
        store=AlertStore(f"sqlite:///{tmp_path}/a.db"),
        reader=FakeReader(),
        health=health,
        notifiers={"rec": rec},
    )  # type: ignore[arg-type]
    try:
        health.items = [
            DaggerHealth(
                "d1",
                team="t",
                state="running",
                last_progress_at=t - 5,
                restart_times=(t - 600, t - 300, t - 30),
                input_rows=1000,
                sink_failures=2,
                sink_retries=5,
                sink_last_error="InfluxDB answered 500",
            )
        ]
        assert levels(engine.evaluate_platform(at=t)) == {
            DOWN: (OK, 5.0),
            RESTARTS: (CRIT, 3.0),
            BAD: (OK, 0.0),
            SINKS: (CRIT, 2.0),
        }
        # a minute later: no new sink failure, one retry; the restarts are still within 15 minutes
        health.items = [
            DaggerHealth(
                "d1",
                team="t",
                state="running",
                last_progress_at=t + 55,
                restart_times=(t - 600, t - 300, t - 30),
                input_rows=2000,
                sink_failures=2,
                sink_retries=6,
            )
        ]
        assert levels(engine.evaluate_platform(at=t + 60)) == {
            DOWN: (OK, 5.0),
            RESTARTS: (CRIT, 3.0),
            BAD: (OK, 0.0),
            SINKS: (WARN, 0.0),
        }
        health.items = [
            DaggerHealth(
                "d1",
                team="t",
                state="failed",
                restart_times=(t - 600, t - 300, t - 30),
                input_rows=2000,
                sink_failures=2,
                sink_retries=6,
                error="SinkError: InfluxDB unreachable",
            )
        ]
        third = levels(engine.evaluate_platform(at=t + 700))  # only the restart at t-30 is within 15 minutes
        assert third[DOWN] == (CRIT, None) and third[RESTARTS] == (OK, 1.0) and third[SINKS] == (OK, 0.0)
        health.items = [DaggerHealth("d1", team="t", state="stopped", recent_restarts=4)]
        fourth = levels(engine.evaluate_platform(at=t + 760))
        assert fourth[DOWN] == (OK, None) and fourth[RESTARTS] == (CRIT, 4.0)
    finally:
        engine.close()
    assert [(n.rule, n.previous_level, n.level) for n in rec.got] == [
        (RESTARTS, "OK", "CRIT"),
        (SINKS, "OK", "CRIT"),
        (SINKS, "CRIT", "WARN"),
        (DOWN, "OK", "CRIT"),
        (RESTARTS, "CRIT", "OK"),
        (SINKS, "WARN", "OK"),
        (DOWN, "CRIT", "OK"),
        (RESTARTS, "OK", "CRIT"),
    ]
    assert rec.got[-1].message == "dagger d1 restarted 4 times in a row"
    assert rec.got[1].message == (
        "dagger d1: 2 sink writes failed and 5 were retried since the last check: InfluxDB answered 500"
    )
    assert rec.got[3].message == "dagger d1 has failed: SinkError: InfluxDB unreachable"
