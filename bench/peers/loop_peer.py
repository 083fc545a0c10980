"""Peer 1: the hand-written Python loop a strong Python engineer writes in an afternoon.

confluent-kafka consumer (assigned to every partition from the beginning), protobuf decode per
record, s2sphere per row, a dict of sets per window, a watermark (the partitions' smallest newest
event time, less the same delay as the dagger), and line-protocol writes to InfluxDB's ``/write`` when a window closes. No Spark.

Usage::

    python bench/peers/loop_peer.py --bootstrap H:P --topic T --influx URL --db DB --measurement M \
        --progress FILE [--delay-ms 10000] [--window-s 60] [--level 13]

Stops at the end of the topic (every partition reported EOF). Exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import requests
import s2sphere
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from progress import ProgressFile  # noqa: E402

from job.schema import default_registry  # noqa: E402


def s2_signed(lat: float, lng: float, level: int) -> int:
    """Return the signed 64-bit S2 cell id (a Java long) of a point at ``level``, with s2sphere."""
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return cid - (1 << 64) if cid >= 1 << 63 else cid


def write_window(
    http: requests.Session, url: str, db: str, measurement: str, end_s: int, cells: dict[int, set[str]]
) -> int:
    """POST one closed window's points (one per cell) to InfluxDB; return how many were written."""
    lines = [f"{measurement},tag_s2id={cell} drivers={len(ids)}i {end_s}" for cell, ids in cells.items()]
    for i in range(0, len(lines), 5000):
        resp = http.post(
            f"{url}/write",
            params={"db": db, "precision": "s"},
            data="\n".join(lines[i : i + 5000]).encode(),
            timeout=30,
        )
        resp.raise_for_status()
    return len(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--influx", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--measurement", required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--delay-ms", type=int, default=10_000)
    ap.add_argument("--window-s", type=int, default=60)
    ap.add_argument("--level", type=int, default=13)
    args = ap.parse_args()

    Ping = default_registry().message_class("daggers.events.DriverLocationPing")
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-loop-{args.measurement}",  # a group of its own per run
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    parts = consumer.list_topics(args.topic, timeout=10).topics[args.topic].partitions
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in parts])
    at_eof: set[int] = set()
    http = requests.Session()
    progress = ProgressFile(args.progress)
    windows: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    # The watermark is the smallest of the partitions' newest event times, less the delay: librdkafka
    # delivers partitions unevenly, and a max over all of them would close windows that a slower
    # partition still has events for.
    newest: dict[int, float] = {p: float("-inf") for p in parts}
    closed_upto = 0  # every window ending at or before this was written
    size, delay_s = args.window_s, args.delay_ms / 1000

    while len(at_eof) < len(parts):
        msgs = consumer.consume(num_messages=10_000, timeout=1.0)
        n = 0
        for msg in msgs:
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    continue
                raise RuntimeError(msg.error().str())
            at_eof.discard(msg.partition())
            ping = Ping.FromString(msg.value())
            ts = ping.event_timestamp.seconds + ping.event_timestamp.nanos / 1e9
            end = (ping.event_timestamp.seconds // size + 1) * size
            n += 1
            if ts > newest[msg.partition()]:
                newest[msg.partition()] = ts
            if end <= closed_upto:
                continue  # late: its window was already written
            windows[end][s2_signed(ping.lat, ping.long, args.level)].add(ping.driver_id)
        points = 0
        watermark = min(newest.values()) - delay_s
        for end in sorted(e for e in windows if e <= watermark):
            points += write_window(http, args.influx, args.db, args.measurement, end, windows.pop(end))
            closed_upto = max(closed_upto, end)
        progress.add(n, points)
    progress.flush(done=True)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
