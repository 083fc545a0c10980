"""Issue 9's must-show end to end: one real dagger (real broker, real Spark) writes to PostgreSQL, Kafka
(protobuf) and InfluxDB at once; every sink holds exactly the ground truth, also after a crash and a
replay of the last micro-batch; a sink that cannot work stops the dagger at start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from job.errors import SinkError
from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.schema import default_registry
from job.spec import DaggerSpec, parse_spec
from job.stack.ports import free_port
from tests.helpers import BOOKINGS_SQL, expected_bookings, influx_points, make_spec, unique
from tests.job.sinks.kafka_records import consume_all

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
AGG = "daggers.aggregates.BookingAggregate"
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]


def with_sinks(text: str, sinks_yaml: str) -> str:
    """Return spec ``text`` (from make_spec) with its single influx sink replaced by ``sinks_yaml``."""
    head, _, influx = text.partition("sink:\n")
    lines = [line.removeprefix("  ") for line in influx.strip("\n").splitlines()]
    return head + "sinks:\n  - " + "\n    ".join(lines) + "\n" + sinks_yaml


def pg_rows(dsn: str, table: str) -> dict[tuple, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT window_timestamp, tag_city_id, tag_s2id, tag_vehicle_type, num_of_bookings FROM {table}"
        ).fetchall()
    out = {(int(w.timestamp()), str(city), s2, vt): n for w, city, s2, vt, n in rows}
    assert len(out) == len(rows)
    return out


def kafka_rows(records) -> dict[tuple, int]:  # type: ignore[no-untyped-def]
    """Decode BookingAggregate records; the latest record per key wins (what a keyed consumer keeps)."""
    cls = default_registry().message_class(AGG)
    names = cls.DESCRIPTOR.fields_by_name["tag_vehicle_type"].enum_type.values_by_number
    out: dict[tuple, int] = {}
    for r in records:
        m = cls.FromString(r.value)
        assert r.timestamp_ms == m.window_timestamp.seconds * 1000  # the record's time is the window's
        out[(m.window_timestamp.seconds, str(m.tag_city_id), m.tag_s2id, names[m.tag_vehicle_type].name)] = (
            m.num_of_bookings
        )
    return out


def test_one_dagger_three_sinks_exact_then_exact_after_a_replay(
    spark,
    tansu_broker,
    influxdb,
    postgres,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, out_topic = unique("bookings"), unique("booking-aggregates")
    db, table = unique("db").replace("-", "_"), unique("bookings_per_s2").replace("-", "_")
    broker.create_topic(topic, partitions=3)
    broker.create_topic(out_topic, partitions=3)
    influxdb.create_database(db)
    events = generate("booking", 4000, seed=21, start=T0, duration_s=300, out_of_order_fraction=0.05)
    closing = generate("booking", 1, seed=22, start=T0 + timedelta(minutes=15), duration_s=1)
    produce(broker.bootstrap, topic, [events, closing], progress=False)
    checkpoint = tmp_path / "ckpt"
    _, text = make_spec(
        name=unique("three"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=checkpoint,
    )
    spec = parse_spec(
        with_sinks(
            text,
            f"""  - type: postgres
    dsn: {postgres.dsn}
    table: {table}
    batch_size: 1000
  - type: kafka
    bootstrap_servers: {broker.bootstrap}
    topic: {out_topic}
    proto_class: {AGG}
""",
        ),
        "three.yaml",
    )
    want = expected_bookings(events.table.to_pylist())
    assert len(want) > 300 and sum(want.values()) > 1500

    first = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert pg_rows(postgres.dsn, table) == want
    records = consume_all(broker.bootstrap, out_topic, len(want))
    assert len(records) == len(want) and kafka_rows(records) == want
    assert influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want
    assert {name: m["rows_written"] for name, m in first.sinks.items()} == {
        "influx": len(want),
        "postgres": len(want),
        "kafka": len(want),
    }
    assert all(m["failures"] == 0 and m["max_write_ms"] > 0 for m in first.sinks.values())

    # A crash after the sinks wrote the last micro-batch but before Spark committed it leaves the batch
    # without its commit file; the next start runs that batch again.
    commits = checkpoint / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    second = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert {name: m["rows_written"] for name, m in second.sinks.items()} == {
        "influx": len(want),
        "postgres": len(want),
        "kafka": len(want),
    }  # the replay wrote every window again
    assert pg_rows(postgres.dsn, table) == want  # upserted: no duplicates
    assert influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want  # overwritten
    replayed = consume_all(broker.bootstrap, out_topic, 2 * len(want))
    assert len(replayed) == 2 * len(want)  # Kafka appends the replayed records (at-least-once) ...
    assert kafka_rows(replayed) == want  # ... with the same keys and values: the latest per key is exact


def _spec(tmp_path: Path, bootstrap: str, topic: str, sinks_yaml: str) -> DaggerSpec:
    _, text = make_spec(
        name=unique("bad"),
        bootstrap=bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    head, _, _ = text.partition("sink:\n")
    return parse_spec(head + "sinks:\n" + sinks_yaml, "bad.yaml")


def test_a_sink_that_cannot_work_stops_the_dagger_before_it_reads(
    spark, tansu_broker, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    topic, out_topic = unique("bookings"), unique("out")
    produce(tansu_broker, topic, generate("booking", 50, seed=3, start=T0, duration_s=60), progress=False)
    port = free_port()
    spec = _spec(
        tmp_path,
        tansu_broker,
        topic,
        f"""  - type: kafka
    bootstrap_servers: {tansu_broker}
    topic: {out_topic}
    create_topic: true
    format: json
  - type: postgres
    dsn: postgresql://daggers:pw-s3cret@127.0.0.1:{port}/daggers
    table: bookings
    connect_timeout_s: 2
""",
    )
    with pytest.raises(SinkError) as info:
        run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert info.value.message.startswith(
        f"sink 'postgres': PostgreSQL at 127.0.0.1:{port}/daggers is unreachable: "
    )
    assert "pw-s3cret" not in str(info.value)
    assert not (tmp_path / "ckpt" / "spark").exists()  # the streaming query never started

    spec = _spec(
        tmp_path,
        tansu_broker,
        topic,
        f"""  - type: kafka
    bootstrap_servers: {tansu_broker}
    topic: {out_topic}
    proto_class: daggers.events.BookingLog
""",
    )
    with pytest.raises(SinkError) as info:
        run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert "does not fit proto_class daggers.events.BookingLog: column 'tag_city_id' has no field" in str(
        info.value
    )
    assert "column 'num_of_bookings' has no field" in str(info.value)
