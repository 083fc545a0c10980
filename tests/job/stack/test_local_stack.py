"""Integration tests of the local stack against real processes (tansu, noida-db, influxd, VictoriaMetrics, PostgreSQL).

The service fixtures come from tests/services.py, loaded by tests/conftest.py (pytest_plugins).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import requests
import typer
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from typer.testing import CliRunner

from job.cli.stack import register
from job.stack import LocalStack, StackError, create_topic, free_ports
from job.stack.influx import influx_query
from job.stack.process import pid_alive
from tests.helpers import reusable_ports

if TYPE_CHECKING:
    from tests.services import BrokerHandle, InfluxHandle, PostgresHandle, VictoriaHandle

pytestmark = pytest.mark.integration

#: 2023-11-14T22:13:20Z: an event time older than noida's default 7-day retention.
OLD_TS_MS = 1_700_000_000_000


def _roundtrip(bootstrap: str, kind: str) -> None:
    """Create a topic, produce one old-timestamped message and read it back by assign (no group join)."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1, kind=kind)  # type: ignore[arg-type]
    create_topic(bootstrap, topic, 1, kind=kind)  # type: ignore[arg-type]  # idempotent
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(
        topic,
        key=b"k1",
        value=b"hello",
        timestamp=OLD_TS_MS,
        on_delivery=lambda err, _msg: errors.append(err) if err else None,
    )
    assert producer.flush(30) == 0
    assert errors == []

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "stack-test", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        msg = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                break
        assert msg is not None and not msg.error(), msg.error() if msg else "no message within 30 s"
        assert (msg.key(), msg.value(), msg.offset(), msg.timestamp()[1]) == (b"k1", b"hello", 0, OLD_TS_MS)
    finally:
        consumer.close()


def _influx_roundtrip(url: str) -> None:
    assert requests.get(f"{url}/ping", timeout=5).status_code == 204
    assert requests.post(f"{url}/query", params={"q": "CREATE DATABASE probe"}, timeout=5).status_code == 200
    write = requests.post(
        f"{url}/write",
        params={"db": "probe", "precision": "ms"},
        data=f"cpu,host=a usage=1.5,n=3i {OLD_TS_MS}",
        timeout=5,
    )
    assert write.status_code == 204, write.text
    body = influx_query(url, """SELECT "usage", "n" FROM "cpu" WHERE "host" = 'a'""", "probe")
    assert body == {
        "results": [
            {
                "statement_id": 0,
                "series": [
                    {
                        "name": "cpu",
                        "columns": ["time", "usage", "n"],
                        "values": [["2023-11-14T22:13:20Z", 1.5, 3]],
                    }
                ],
            }
        ]
    }


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pid_alive(pid)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A LocalStack under tmp_path that is brought down after the test whatever happens."""
    local = LocalStack(tmp_path / "state")
    try:
        yield local
    finally:
        local.down()


@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_up_serves_kafka_and_influx_and_down_stops_everything(stack: LocalStack, kind: str) -> None:
    broker_port, influx_port = free_ports(2)
    status = stack.up(broker=kind, broker_port=broker_port, influx_port=influx_port)  # type: ignore[arg-type]

    assert status.healthy
    assert [(s.name, s.kind, s.port) for s in status.services] == [
        ("broker", kind, broker_port),
        ("influxdb", "influxdb", influx_port),
    ]
    assert status.bootstrap == f"127.0.0.1:{broker_port}"
    assert status.influx_url == f"http://127.0.0.1:{influx_port}"
    assert status.to_dict()["services"][0]["pid"] == status.services[0].pid
    json.dumps(status.to_dict())

    state = json.loads((stack.state_dir / "stack.json").read_text())
    assert state["broker"]["kind"] == kind
    assert state["broker"]["pid"] == status.services[0].pid
    assert state["influxdb"]["pid"] == status.services[1].pid
    assert (stack.state_dir / "broker" / "broker.log").is_file()
    assert (stack.state_dir / "broker" / "broker.pid").read_text().strip() == str(status.services[0].pid)
    for sub in ("meta", "data", "wal"):
        assert (stack.state_dir / "influxdb" / sub).is_dir()
    if kind == "noida":
        assert (stack.state_dir / "broker" / "data").is_dir()

    _roundtrip(status.bootstrap or "", kind)
    _influx_roundtrip(status.influx_url or "")
    databases = influx_query(status.influx_url or "", "SHOW DATABASES")["results"][0]["series"][0]["values"]
    assert ["daggers"] in databases

    again = stack.up(broker=kind, broker_port=broker_port, influx_port=influx_port)  # type: ignore[arg-type]
    assert [s.pid for s in again.services] == [s.pid for s in status.services]

    pids = [s.pid for s in status.services if s.pid]
    stack.down()
    assert all(_gone(pid, 0.1) for pid in pids)
    assert not Path("/proc", str(pids[0])).exists() or not pid_alive(pids[0])
    assert not (stack.state_dir / "stack.json").exists()
    assert stack.status().services == []
    stack.down()  # harmless when already down


def test_port_in_use_gives_stack_error_naming_port_and_service(stack: LocalStack) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (free,) = free_ports(1)

        with pytest.raises(StackError, match=rf"port {port} for the broker is already in use") as caught:
            stack.up(broker="tansu", broker_port=port, influx_port=free)
        assert caught.value.title
        assert "--broker-port" in str(caught.value)

        broker_port = next(p for p in free_ports(2) if p != port)
        with pytest.raises(StackError, match=rf"port {port} for InfluxDB is already in use"):
            stack.up(broker="tansu", broker_port=broker_port, influx_port=port)


def test_status_reports_killed_service_down_and_up_restarts_it(stack: LocalStack) -> None:
    broker_port, influx_port = reusable_ports(2)  # the broker comes back on the same port
    first = stack.up(broker="tansu", broker_port=broker_port, influx_port=influx_port)
    broker_pid = first.services[0].pid
    influx_pid = first.services[1].pid
    assert broker_pid and influx_pid

    os.kill(broker_pid, signal.SIGKILL)
    assert _gone(broker_pid)

    status = stack.status()
    broker, influx = status.services
    assert (broker.name, broker.running, broker.healthy) == ("broker", False, False)
    assert (influx.name, influx.running, influx.healthy) == ("influxdb", True, True)
    assert not status.healthy

    again = stack.up(broker="tansu", broker_port=broker_port, influx_port=influx_port)
    assert again.healthy
    assert again.services[0].pid != broker_pid
    assert again.services[1].pid == influx_pid


def test_up_with_other_settings_while_running_is_refused(stack: LocalStack) -> None:
    broker_port, influx_port, other = free_ports(3)
    stack.up(broker="tansu", broker_port=broker_port, influx_port=influx_port)
    with pytest.raises(StackError, match="daggers down"):
        stack.up(broker="noida", broker_port=broker_port, influx_port=influx_port)
    with pytest.raises(StackError, match=f"port {other}"):
        stack.up(broker="tansu", broker_port=other, influx_port=influx_port)


def test_cli_up_status_down(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    state = str(tmp_path / "cli-state")
    broker_port, influx_port = free_ports(2)
    try:
        result = runner.invoke(
            app,
            [
                "up",
                "--broker",
                "tansu",
                "--broker-port",
                str(broker_port),
                "--influx-port",
                str(influx_port),
                "--state-dir",
                state,
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["bootstrap"] == f"127.0.0.1:{broker_port}"

        result = runner.invoke(app, ["status", "--state-dir", state])
        assert result.exit_code == 0, result.output
        assert f"127.0.0.1:{broker_port}" in result.stdout and "healthy" in result.stdout

        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = runner.invoke(
                app, ["up", "--broker-port", str(port), "--state-dir", str(tmp_path / "other"), "--json"]
            )
        assert result.exit_code == 2
        assert f"port {port} for the broker is already in use" in result.output
        assert "Traceback" not in result.output
    finally:
        result = runner.invoke(app, ["down", "--state-dir", state])
    assert result.exit_code == 0, result.output

    result = runner.invoke(app, ["status", "--state-dir", state, "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["services"] == []


# -- the fixtures in tests/services.py -----------------------------------------------------------


def test_broker_fixture_produces_and_consumes(broker: BrokerHandle) -> None:
    assert broker.kind in ("tansu", "noida")
    _roundtrip(broker.bootstrap, broker.kind)


def test_influxdb_fixture_writes_and_reads(influxdb: InfluxHandle) -> None:
    influxdb.create_database("fx")
    influxdb.write("m,t=x v=2 1700000000", "fx", precision="s")
    assert influxdb.query('SELECT "v" FROM "m"', "fx") == [
        {"name": "m", "columns": ["time", "v"], "values": [["2023-11-14T22:13:20Z", 2]]}
    ]
    _influx_roundtrip(influxdb.url)


def test_victoria_metrics_fixture_is_healthy(victoria_metrics: VictoriaHandle) -> None:
    resp = requests.get(f"{victoria_metrics.url}/health", timeout=5)
    assert resp.status_code == 200


def test_postgres_fixture_answers_select_1(postgres: PostgresHandle) -> None:
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(postgres.dsn, connect_timeout=10) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
