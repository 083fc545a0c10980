"""A team's dagger end to end with nothing of its own in the project: its schema is a descriptor
set served over HTTP on 127.0.0.1 (schema_url), its look-up collection a dart store served the same
way; events through the real broker (tansu), real Spark, real InfluxDB; exact points read back."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer

from job.query.plan import PINNED_SCHEMA, plan
from job.query.runner import run_foreground
from job.schema.compile import compile_descriptor_set
from job.schema.registry import SchemaRegistry
from job.spec import parse_spec
from tests.helpers import influx_points, serve_directory, unique
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
PROTO = """syntax = "proto3";
package team.rides;

import "google/protobuf/timestamp.proto";

message RideLog {
  string ride_id = 1;
  string zone_id = 2;
  google.protobuf.Timestamp event_timestamp = 3;
  int64 fare = 4;
}
"""
SQL = """SELECT DartGet('zones', zone_id, 24, 'unknown') AS tag_zone,
       count(1) AS rides,
       SUM(fare) AS fares,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), DartGet('zones', zone_id, 24, 'unknown')"""


def test_a_team_dagger_with_its_own_schema_and_darts(spark, tansu_broker, influxdb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "team-protos" / "team" / "rides"
    root.mkdir(parents=True)
    (root / "ride.proto").write_text(PROTO)
    served = tmp_path / "served"
    (served / "darts" / "dart-get").mkdir(parents=True)
    (served / "schemas").mkdir()
    (served / "schemas" / "rides-v1.pb").write_bytes(
        compile_descriptor_set(tmp_path / "team-protos", tmp_path / "o")
    )
    (served / "darts" / "dart-get" / "zones").write_text(json.dumps({"z1": "north", "z2": "south"}))
    ride = SchemaRegistry((served / "schemas" / "rides-v1.pb").read_bytes()).message_class(
        "team.rides.RideLog"
    )

    events = []
    for i in range(600):
        at = T0 + timedelta(seconds=i * 0.3)  # three minutes
        events.append((f"r-{i}", f"z{i % 3 + 1}", at, 1000 + i % 7))
    closing = ("r-close", "z1", T0 + timedelta(minutes=15), 0)  # moves the watermark past every window
    topic, db = unique("rides"), unique("db").replace("-", "_")
    BrokerHandle("tansu", tansu_broker).create_topic(topic, partitions=2)
    influxdb.create_database(db)
    producer = Producer({"bootstrap.servers": tansu_broker})
    for ride_id, zone, at, fare in [*events, closing]:
        msg = ride(ride_id=ride_id, zone_id=zone, fare=fare)
        msg.event_timestamp.FromDatetime(at)
        producer.produce(topic, msg.SerializeToString(), key=ride_id)
    assert producer.flush(30) == 0

    with serve_directory(served) as (url, requests):
        spec = parse_spec(
            f"""name: {unique("team")}
streams:
  - table: data_stream
    topics: [{topic}]
    proto_class: team.rides.RideLog
    timestamp_field: event_timestamp
    bootstrap_servers: {tansu_broker}
    group: {unique("g")}
    start_from: earliest
schema_url: {url}/schemas/rides-v1.pb
dart_store: {url}/darts
sql: |
{chr(10).join("  " + line for line in SQL.splitlines())}
watermark_delay_ms: 30000
parallelism: 2
checkpoint_dir: {tmp_path / "ckpt"}
trigger_interval_s: 1
sink:
  type: influx
  url: {influxdb.url}
  database: {db}
  measurement: m
""",
            "team.yaml",
        )
        progress = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
        dart_reads = [r for r in requests if r.startswith("/darts/")]
    assert progress.input_rows == 601
    assert (tmp_path / "ckpt" / PINNED_SCHEMA).read_bytes() == (
        served / "schemas" / "rides-v1.pb"
    ).read_bytes()
    zones = {"z1": "north", "z2": "south"}
    want_rides: Counter[tuple[int, str]] = Counter()
    want_fares: defaultdict[tuple[int, str], int] = defaultdict(int)
    for _, zone, at, fare in events:
        end = int(at.timestamp()) // 60 * 60 + 60
        key = (end, zones.get(zone, "unknown"))
        want_rides[key] += 1
        want_fares[key] += fare
    assert influx_points(influxdb, db, "m", "rides", ["tag_zone"]) == dict(want_rides)
    assert influx_points(influxdb, db, "m", "fares", ["tag_zone"]) == dict(want_fares)
    assert len(want_rides) == 9  # three windows × north, south, unknown
    assert 1 <= len(dart_reads) <= 8, dart_reads  # per Python worker, never per row
