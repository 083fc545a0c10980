"""A registry with two teams, their users and clusters in two data centres, for control-plane tests.

team-a: adam (admin), alice (editor), vera (viewer); clusters a-jkt (jkt) and a-sgp (sgp).
team-b: bob (editor); cluster b-jkt (jkt). root is the superuser.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry, bootstrap_admin
from tests.helpers import booking_spec

BOOKINGS_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
WHERE status = 'COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""


def bookings_spec(
    name: str, topic: str = "booking-log", db: str = "daggers", measurement: str = "bookings"
) -> str:
    """Return a valid one-stream spec text (brokers and InfluxDB come from the cluster's variables)."""
    return booking_spec(
        name,
        topic=topic,
        bootstrap="${DAGGERS_BOOTSTRAP}",
        group=f"dagger-{name}",
        stream="    start_from: earliest\n",
        sql=BOOKINGS_SQL,
        settings="watermark_delay_ms: 10000\ntrigger_interval_s: 1\n",
        sink=f"sink:\n  type: influx\n  url: ${{DAGGERS_INFLUX}}\n  database: {db}\n"
        f"  measurement: {measurement}\n",
    )


def seed(
    registry: Registry,
    *,
    kafka: str = "127.0.0.1:9",
    influx: str = "http://127.0.0.1:9",
    master: str = "local[2]",
) -> ControlPlane:
    """Fill ``registry`` with the teams, users and clusters above; return root's control plane."""
    bootstrap_admin(registry, "root")
    root = ControlPlane(registry, "root")
    for team in ("team-a", "team-b"):
        root.add_team(team)
    for user in ("adam", "alice", "vera", "bob"):
        root.add_user(user)
    root.set_member("team-a", "adam", "admin")
    root.set_member("team-a", "alice", "editor")
    root.set_member("team-a", "vera", "viewer")
    root.set_member("team-b", "bob", "editor")
    root.add_datacentre("jkt", "Jakarta")
    root.add_datacentre("sgp", "Singapore")
    for name, team, dc in (
        ("a-jkt", "team-a", "jkt"),
        ("a-sgp", "team-a", "sgp"),
        ("b-jkt", "team-b", "jkt"),
    ):
        root.add_cluster(
            name, team=team, datacentre=dc, spark_master=master, kafka_bootstrap=kafka, influx_url=influx
        )
    return root


def live_world(kafka: str, influxdb: object, tmp_path: Path, prefix: str) -> tuple[str, str, str, Registry]:
    """A seeded SQLite registry over a real broker and InfluxDB, for end-to-end tests with controllers.

    Creates a 2-partition topic and a database named after ``prefix``; returns (topic, database,
    registry URL, registry). Both clusters of team-a run ``local[2]``.
    """
    from job.stack.broker import create_topic
    from tests.helpers import unique

    topic, db = unique(f"{prefix}-bookings"), unique(prefix).replace("-", "_")
    create_topic(kafka, topic, 2)
    influxdb.create_database(db)  # type: ignore[attr-defined]
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    seed(registry, kafka=kafka, influx=influxdb.url, master="local[2]")  # type: ignore[attr-defined]
    return topic, db, url, registry


def stop_controllers(controllers: Iterable[subprocess.Popen[bytes]], dagger_pids: Iterable[int]) -> None:
    """Stop controller processes (SIGTERM, SIGKILL of the group after 90 s), then kill whatever is left of
    the daggers' process groups: a test leaves no process behind."""
    controllers = list(controllers)
    for proc in controllers:
        proc.send_signal(signal.SIGTERM)
    for proc in controllers:
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    for pid in dagger_pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def postgres_url(dsn: str) -> str:
    """Create a fresh database on the test PostgreSQL server and return its URL."""
    import psycopg

    name = f"reg_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return dsn.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgres"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Registry]:
    """An empty registry, once on SQLite and once on the real PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        url = postgres_url(request.getfixturevalue("postgres").dsn)
    reg = Registry(url)
    yield reg
    reg.close()


REPO = Path(__file__).resolve().parents[3]


def start_controller(url: str, tmp_path: Path, log: Path, *, standby: bool = True) -> subprocess.Popen[bytes]:
    """Start ``daggers controller`` for cluster ``a-jkt`` of the registry at ``url`` (its state under
    ``tmp_path / "state"``, a round every 0.5 s, a 1-s back-off, its daggers stopped when it exits; with
    ``standby=False`` it takes no standby's place), in a session of its own, writing to ``log``; returns it."""
    argv = [sys.executable, "-m", "job.cli", "controller", "--cluster", "a-jkt", "--registry", url]
    argv += ["--state-dir", str(tmp_path / "state"), "--poll", "0.5", "--backoff", "1"]
    argv += [] if standby else ["--no-standby"]
    return subprocess.Popen(
        [*argv, "--stop-daggers-on-exit"],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=REPO,
    )
