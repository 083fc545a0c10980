"""Stream driver pings to Kafka in real time at a steady rate, with event time = wall-clock time.

Encoding 100,000 pings a second with protobuf in Python would take a good part of a core away from
the job under test, so the feeder encodes a pool of pings once and, for each one-second chunk,
patches the Timestamp's ``seconds`` (a fixed-width 5-byte varint for any time between 2004 and
3058) into the pooled payloads. Every ping of chunk ``k`` gets event time ``t0 + k`` s plus its
pooled sub-second ``nanos``, so event time follows the wall clock.

Usage::

    python bench/feeder.py --bootstrap H:P --topic T --rate R --seconds S --out FILE.json [--pool N]

Writes to ``--out`` (JSON, after every chunk) the start ``t0`` and, per chunk, the wall times its
first and last events were handed to the producer; the harness uses it to know when each window's watermark could pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402

from bench.workloads import driver_pings  # noqa: E402
from job.produce.producer import PRODUCER_CONFIG, ensure_topic  # noqa: E402

TS_TAG = b"\x32"  # field 6 (event_timestamp), wire type 2
SECONDS_TAG = b"\x08"  # Timestamp.seconds, field 1, varint


def varint5(value: int) -> bytes:
    """Return ``value`` as a protobuf varint; raise ValueError unless it takes exactly 5 bytes."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            break
    if len(out) != 5:
        raise ValueError("the seconds varint must be 5 bytes (a time between 2004 and 3058)")
    return bytes(out)


def split_pool(payloads: list[bytes], seconds: list[int]) -> list[tuple[bytes, bytes]]:
    """Split each payload around its Timestamp.seconds varint (``seconds[i]``); return (head, tail) pairs.

    Raises ValueError when a payload does not hold its seconds where a DriverLocationPing puts it.
    """
    out = []
    for p, sec in zip(payloads, seconds, strict=True):
        marker = SECONDS_TAG + varint5(sec)
        at = p.find(TS_TAG)
        i = p.find(marker, at)
        if at < 0 or i < 0:
            raise ValueError("a pooled payload has no Timestamp.seconds where expected")
        out.append((p[: i + 1], p[i + 6 :]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--rate", type=float, required=True, help="events per second")
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--pool", type=int, default=0, help="pooled pings (default: 20 s of the rate, at most 2M)"
    )
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()

    rate = int(args.rate)
    out = Path(args.out)
    pool_n = args.pool or min(2_000_000, rate * 20)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    pool = driver_pings(pool_n, args.seed, base, float(rate))
    micros = pool.table.column("event_timestamp").cast("int64").to_numpy()
    parts = split_pool(pool.payloads, (micros // 1_000_000).tolist())
    keys = pool.keys
    ensure_topic(args.bootstrap, args.topic, 4)
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": args.bootstrap})
    t0 = float(int(time.time()) + 1)
    while time.time() < t0:
        time.sleep(0.01)
    sent_at: list[tuple[int, float, float]] = []
    cursor = 0
    for k in range(args.seconds):
        sec = int(t0) + k
        stamp = varint5(sec)
        ms = sec * 1000
        slice_start = time.time()
        target_end = t0 + k + 1
        for j in range(rate):
            i = (cursor + j) % pool_n
            head, tail = parts[i]
            while True:
                try:
                    producer.produce(args.topic, head + stamp + tail, keys[i], timestamp=ms)
                    break
                except BufferError:
                    producer.poll(0.01)
            if j % 5000 == 4999:
                producer.poll(0)
                # pace within the second: do not run ahead of the wall clock by more than a tenth
                ahead = (slice_start + (j + 1) / rate) - time.time()
                if ahead > 0.1:
                    time.sleep(ahead - 0.05)
        cursor = (cursor + rate) % pool_n
        producer.poll(0)
        sent_at.append((sec, slice_start, time.time()))
        _write(out, t0, rate, args.seconds, sent_at, done=False)
        wait = target_end - time.time()
        if wait > 0:
            producer.flush(wait)
            rest = target_end - time.time()
            if rest > 0:
                time.sleep(rest)
    producer.flush(30)
    _write(out, t0, rate, args.seconds, sent_at, done=True)
    return 0


def _write(
    out: Path, t0: float, rate: int, seconds: int, sent_at: list[tuple[int, float, float]], done: bool
) -> None:
    """Write the feeder's record so far (atomically: the harness may read it at any time)."""
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"t0": t0, "rate": rate, "seconds": seconds, "sent_at": sent_at, "done": done}))
    tmp.replace(out)


if __name__ == "__main__":
    sys.exit(main())
