"""Peer 3: Quix Streams (tumbling windows on Kafka, in Python), as its documentation shows them.

Runs in its own virtualenv (quixstreams pins confluent-kafka < 2.13, older than the project's):
see ``bench/setup_quix.sh``. It imports nothing from the project: the message class is built from
the FileDescriptorSet the harness writes next to the progress file.

Pipeline: ``ProtobufDeserializer(to_dict=False)`` → ``apply`` (s2sphere cell id per row) →
``group_by`` the cell (a repartition topic) → ``tumbling_window(60 s, grace = the dagger's
watermark delay)`` → ``reduce`` to the distinct driver ids → ``final(closing_strategy="partition")``
(the default, "key", closes a cell's window only when that cell gets a later ping) → a ``BatchingSink``
posting line protocol to InfluxDB's ``/write``.

Usage::

    quix-venv/bin/python bench/peers/quix_peer.py --bootstrap H:P --topic T --influx URL --db DB \
        --measurement M --progress FILE --descriptors FILE.pb --state-dir DIR

Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import requests
import s2sphere
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from quixstreams import Application
from quixstreams.models.serializers.protobuf import ProtobufDeserializer
from quixstreams.sinks.base import BatchingSink, SinkBatch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from progress import ProgressFile  # noqa: E402


def message_class(descriptors: Path, full_name: str) -> type:
    """Return the protobuf class ``full_name`` from a serialized FileDescriptorSet."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(descriptors.read_bytes()).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def s2_signed(lat: float, lng: float) -> str:
    """Return the signed decimal level-13 S2 cell id of one point, with s2sphere."""
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(13).id()
    return str(cid - (1 << 64) if cid >= 1 << 63 else cid)


class InfluxLineSink(BatchingSink):
    """Writes each closed window (key = cell) as one point to InfluxDB 1.x ``/write``."""

    def __init__(self, url: str, db: str, measurement: str, progress: ProgressFile) -> None:
        super().__init__()
        self.url, self.db, self.measurement, self.progress = url, db, measurement, progress
        self.http = requests.Session()

    def write(self, batch: SinkBatch) -> None:
        lines = []
        for item in batch:
            key = item.key.decode() if isinstance(item.key, bytes) else str(item.key)
            key = key.strip('"')
            end_s = item.value["end"] // 1000
            lines.append(f"{self.measurement},tag_s2id={key} drivers={len(item.value['value'])}i {end_s}")
        for i in range(0, len(lines), 5000):
            resp = self.http.post(
                f"{self.url}/write",
                params={"db": self.db, "precision": "s"},
                data="\n".join(lines[i : i + 5000]).encode(),
                timeout=30,
            )
            resp.raise_for_status()
        self.progress.add(0, len(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in (
        "--bootstrap",
        "--topic",
        "--influx",
        "--db",
        "--measurement",
        "--progress",
        "--descriptors",
        "--state-dir",
    ):
        ap.add_argument(name, required=True)
    ap.add_argument("--delay-ms", type=int, default=10_000)
    args = ap.parse_args()

    Ping = message_class(Path(args.descriptors), "daggers.events.DriverLocationPing")
    progress = ProgressFile(args.progress)
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        loglevel="WARNING",
        # tansu takes about half of session.timeout.ms to let a consumer join a group
        consumer_extra_config={"session.timeout.ms": 6000},
    )
    topic = app.topic(
        args.topic,
        value_deserializer=ProtobufDeserializer(msg_type=Ping, to_dict=False),
        key_deserializer="bytes",
    )
    sdf = app.dataframe(topic)

    def count(_value: object) -> None:
        progress.add(1)

    sdf = sdf.update(count)
    sdf = sdf.apply(lambda m: {"cell": s2_signed(m.lat, m.long), "driver_id": m.driver_id})
    sdf = sdf.group_by("cell")

    def add_driver(ids: list[str], value: dict) -> list[str]:
        if value["driver_id"] not in ids:
            ids.append(value["driver_id"])
        return ids

    sdf = (
        sdf.tumbling_window(timedelta(seconds=60), grace_ms=timedelta(milliseconds=args.delay_ms))
        .reduce(reducer=add_driver, initializer=lambda value: [value["driver_id"]])
        .final(closing_strategy="partition")
    )
    sdf.sink(InfluxLineSink(args.influx, args.db, args.measurement, progress))
    try:
        app.run()
    finally:
        progress.flush(done=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
