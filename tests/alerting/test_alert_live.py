"""Issue 6's must-show, live and end to end: a producer sends bookings in real time, a REAL dagger counts
them in 5-second windows into InfluxDB, and ``daggers alerts run`` (a separate process, APScheduler with
its SQLAlchemy job store) watches the output and delivers to local webhook and SMTP receivers.

* a threshold alert fires while bookings run high; the engine is then SIGKILLed and restarted, and
  SIGTERMed and restarted, mid-incident: nothing is sent twice, and the resolve comes once;
* a no-data rule fires when the producer stops (and not before);
* ``daggers alerts list`` shows what fires; no secret reaches the engine's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer
from typer.testing import CliRunner

from job.produce.generator import generate
from job.query.plan import plan
from job.query.runner import DaggerJob
from job.stack.broker import create_topic
from tests.alerting.alert_receivers import HttpReceiver, SmtpReceiver
from tests.alerting.alert_setup import FAST_DELIVERY, SECRETS, WEBHOOK_SECRET, channels_yaml
from tests.helpers import make_spec, unique, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

REPO = Path(__file__).resolve().parents[2]
LIVE_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       TUMBLE_END(rowtime, INTERVAL '5' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '5' SECOND), city_id"""
CLI = "import typer; from job.cli.alerts import register; app = typer.Typer(); register(app); app()"


class LiveProducer:
    """Sends Jakarta bookings with event time = now at ``rate`` per second, in slices of about a quarter-second
    (a late slice makes up for the time it lost), and counts them per 5-s window."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self.topic = topic
        self.rate = rate
        self.sent = 0
        self.per_window: Counter[int] = Counter()  # events sent per 5-s window of event time
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LiveProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        owed, seed, last = 0.0, 1000, time.time()
        while not self._stop.is_set():
            began = time.time()
            span, last = began - last, began
            owed += self.rate * span  # what the time since the last slice owes (a late loop owes more)
            n = int(owed)
            if n:
                owed -= n
                seed += 1
                batch = generate(
                    "booking",
                    n,
                    seed=seed,
                    start=datetime.fromtimestamp(began - span, tz=UTC),
                    duration_s=span,
                    cities=["Jakarta"],
                )
                for payload, key, ts in zip(batch.payloads, batch.keys, batch.timestamps_ms(), strict=True):
                    self._producer.produce(self.topic, value=payload, key=key, timestamp=ts)
                    self.per_window[ts // 5000] += 1
                self._producer.poll(0)
                self.sent += n
            self._stop.wait(max(0.0, 0.25 - (time.time() - began)))
        self._producer.flush(10)
        del self._producer  # its threads go with it (no reconnect noise after the broker stops)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


class EngineProcess:
    """``daggers alerts run`` in its own process group, logging to a file."""

    def __init__(self, config: Path, state_dir: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLI,
                "alerts",
                "run",
                "--config",
                str(config),
                "--state-dir",
                str(state_dir),
            ],
            cwd=REPO,
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def signal(self, sig: int) -> int:
        os.killpg(self.proc.pid, sig)
        return self.proc.wait(90)  # a graceful stop waits for running evaluations and sends (10 s timeouts)

    def kill_quietly(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def influx_count(url: str, db: str, measurement: str) -> int:
    body = requests.get(
        f"{url}/query", params={"db": db, "q": f'SELECT count("bookings") FROM "{measurement}"'}, timeout=10
    ).json()
    series = body["results"][0].get("series") or []
    return int(series[0]["values"][0][1]) if series else 0


def test_live_threshold_restart_and_no_data(
    spark,
    tansu_broker,
    influxdb,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    http_receiver: HttpReceiver,
    smtp_receiver: SmtpReceiver,
) -> None:
    http, smtp = http_receiver.up(), smtp_receiver.up()
    topic, db, measurement = unique("live-bookings"), unique("live").replace("-", "_"), "live_bookings"
    create_topic(tansu_broker, topic, 2, kind="tansu")
    influxdb.create_database(db)
    spec, _ = make_spec(
        name=unique("live-city"),
        bootstrap=tansu_broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=LIVE_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement=measurement,
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=1000,
        trigger_interval_s=1.0,
    )
    config = tmp_path / "alerts.yaml"
    config.write_text(f"""influx:
  url: {influxdb.url}
  database: {db}
store:
  url: sqlite:///{tmp_path / "alerts.db"}
{FAST_DELIVERY}{channels_yaml(http, smtp)}
default_channels: [webhook, email]
rules:
  - name: live-bookings-high
    team: bookings
    measurement: {measurement}
    field: bookings
    aggregate: last
    group_by: [tag_city_id]
    window: 30s
    every: 2s
    on_no_data: keep
    crit: {{above: 50}}
    message: "{{bookings:.0f}} bookings in 5 s in city {{tag_city_id}} ({{condition}})"
  - name: live-output-stopped
    kind: deadman
    team: bookings
    dagger: {spec.name}
    measurement: {measurement}
    period: 25s
    every: 2s
""")

    def events(rule: str) -> list[str]:
        return [r.json["status"] for r in http.posts(WEBHOOK_SECRET) if r.json["rule"] == rule]

    producer = LiveProducer(tansu_broker, topic, rate=20.0).start()  # 100 bookings per 5-second window
    job = DaggerJob(plan(spec, tmp_path), spark)
    engines: list[EngineProcess] = []
    try:
        job.start(trigger_interval_s=1.0)
        wait_until(
            "the dagger's first windows", lambda: influx_count(influxdb.url, db, measurement) >= 2, 180
        )
        # live before the no-data rule looks: a dagger that started slowly writes its first windows late, and
        # an engine that looked then saw no point newer than 25 s (it fired and resolved at once on a busy machine)
        wait_until(
            "the dagger to catch up",
            lambda: time.time() - newest_point(influxdb.url, db, measurement) < 12.0,
            180,
        )

        # 1. the threshold fires once
        engines.append(EngineProcess(config, tmp_path, tmp_path / "engine-1.log"))
        wait_until(
            "the trigger",
            lambda: events("live-bookings-high") == ["firing"],
            60,
            proc=engines[-1].proc,
            log=engines[-1].log,
        )
        for channel in ("webhook", "email"):  # both deliveries recorded in the store before the crash
            wait_until(
                f"the {channel} delivery recorded",
                lambda c=channel: (
                    f"delivered firing of live-bookings-high to channel '{c}'" in engines[-1].log.read_text()
                ),
                60,
                proc=engines[-1].proc,
                log=engines[-1].log,
            )
        # 2. crash mid-incident, restart: the new engine takes over the lease and sends nothing again
        assert engines[-1].signal(signal.SIGKILL) == -signal.SIGKILL
        engines.append(EngineProcess(config, tmp_path, tmp_path / "engine-2.log"))
        wait_until(
            "engine 2",
            lambda: "alert engine started" in engines[-1].log.read_text(),
            60,
            proc=engines[-1].proc,
            log=engines[-1].log,
        )
        time.sleep(8.0)  # four evaluations, the alert still CRIT
        assert events("live-bookings-high") == ["firing"]
        # 3. graceful stop and restart, still mid-incident
        assert engines[-1].signal(signal.SIGTERM) == 0
        assert "alert engine stopped" in engines[-1].log.read_text()
        engines.append(EngineProcess(config, tmp_path, tmp_path / "engine-3.log"))
        wait_until(
            "engine 3",
            lambda: "alert engine started" in engines[-1].log.read_text(),
            60,
            proc=engines[-1].proc,
            log=engines[-1].log,
        )
        time.sleep(6.0)
        assert events("live-bookings-high") == ["firing"]
        # 4. bookings calm down (20 per window): one resolve
        producer.rate = 4.0
        wait_until(
            "the resolve",
            lambda: events("live-bookings-high") == ["firing", "resolved"],
            90,
            proc=engines[-1].proc,
            log=engines[-1].log,
        )
        assert events("live-output-stopped") == []  # output kept flowing: the no-data rule stayed quiet
        # 5. the producer stops: the dagger's output stops, the no-data rule fires
        producer.stop()
        stopped_at = time.monotonic()
        wait_until(
            "the no-data alert",
            lambda: events("live-output-stopped") == ["firing"],
            120,
            proc=engines[-1].proc,
            log=engines[-1].log,
        )
        fired_after = time.monotonic() - stopped_at
        listed = CliRunner().invoke(
            _cli(), ["alerts", "list", "--config", str(config), "--state-dir", str(tmp_path), "--json"]
        )
        time.sleep(3.0)
        assert engines[-1].signal(signal.SIGTERM) == 0
    finally:
        producer.stop()
        for engine in engines:
            engine.kill_quietly()
        job.stop()

    assert listed.exit_code == 0, listed.output
    firing = json.loads(listed.output)["firing"]
    assert [(f["rule"], f["level"], f["tags"]) for f in firing] == [("live-output-stopped", "CRIT", {})]
    # it fired at the first evaluation (every 2 s) after 25 s had passed since the dagger's newest point
    newest = newest_point(influxdb.url, db, measurement)
    fired_at = datetime.fromisoformat(stopped_json(http)["at"].replace("Z", "+00:00")).timestamp()
    # (not before; how much after is the machine's: an evaluation every 2 s, late when it is busy)
    assert 25.0 < fired_at - newest <= 25.0 + 2.0 + 30.0, (fired_at, newest)
    assert fired_after < 120.0
    assert events("live-bookings-high") == ["firing", "resolved"]
    assert events("live-output-stopped") == ["firing"]
    trigger = next(r.json for r in http.posts(WEBHOOK_SECRET) if r.json["rule"] == "live-bookings-high")
    # the value is a whole window's count of what was sent (about 100 at 20 bookings/s)
    assert trigger["value"] in {n for n in producer.per_window.values() if n > 50}, (
        trigger,
        producer.per_window,
    )
    assert trigger["message"] == f"{trigger['value']:.0f} bookings in 5 s in city 1 (above 50)"
    stopped = stopped_json(http)
    assert (
        stopped["message"]
        == f"live-output-stopped is CRIT: no data from {measurement} in (no tags) (no data for 25s)"
    )
    assert stopped["labels"]["dagger"] == spec.name
    assert [m["Subject"] for m in smtp.mails()] == [
        "[CRIT] live-bookings-high tag_city_id=1",
        "[RESOLVED] live-bookings-high tag_city_id=1",
        "[CRIT] live-output-stopped",
    ]
    logs = "".join(e.log.read_text() for e in engines)
    for secret in SECRETS:
        assert secret not in logs


def newest_point(url: str, db: str, measurement: str) -> float:
    body = requests.get(
        f"{url}/query",
        params={"db": db, "epoch": "ms", "q": f'SELECT last("bookings") FROM "{measurement}"'},
        timeout=10,
    ).json()
    return body["results"][0]["series"][0]["values"][0][0] / 1000.0


def stopped_json(http: HttpReceiver) -> dict:
    return next(r.json for r in http.posts(WEBHOOK_SECRET) if r.json["rule"] == "live-output-stopped")


def _cli():  # type: ignore[no-untyped-def]
    import typer

    from job.cli.alerts import register

    app = typer.Typer()
    register(app)
    return app
