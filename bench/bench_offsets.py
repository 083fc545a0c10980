"""How long the source's end-offset look-up takes on a local broker as a topic grows.

Usage::

    python bench/bench_offsets.py [--broker tansu|noida] [--steps 3] [--step-records 50000000] [--rate 100000]

Starts a broker on an OS-chosen port, creates a 4-partition topic and, per step, produces
``--step-records`` 60-byte records (two producer processes), then, with a third producer writing
``--rate`` records/s to the same topic (as in a live run), times 30 look-ups, 0.5 s apart, of:

* ``ListOffsets x4``: ``get_watermark_offsets`` per partition (earliest and latest);
* ``end_offsets``: what the source runs before every micro-batch (those, then one fetch of each
  partition's newest record, whose response carries the true high watermark: tansu's "latest"
  is only a lower bound);
* ``metadata``: the partition list (also looked up before every micro-batch), the peer: a request
  whose cost does not depend on the topic's size;
* ``end_offsets (prefetch)``: the same look-up on a consumer with librdkafka's prefetch defaults
  (``queued.min.messages`` 100000, ``fetch.queue.backoff.ms`` 1000), the peer of the source's settings:
  it leaves a follow-up fetch that tansu holds ``fetch.wait.max.ms`` in front of the next look-up.

``--gap-s`` sets the pause between samples (0.5 s by default; 0 for look-ups back to back).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402

from job.sources import offsets as kofs  # noqa: E402
from job.stack import free_ports, make_broker  # noqa: E402
from job.stack.broker import create_topic  # noqa: E402

TOPIC = "bench-offsets"
PARTITIONS = 4


def produce(bootstrap: str, n: int, rate: float) -> None:
    """Send ``n`` records round-robin over the partitions, at ``rate`` records/s (0: as fast as possible)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000})
    payload = b"x" * 60
    started, sent = time.time(), 0
    while sent < n:
        if rate:
            ahead = sent / rate - (time.time() - started)
            if ahead > 0:
                time.sleep(ahead)
        for _ in range(1000):
            while True:
                try:
                    producer.produce(TOPIC, payload, partition=sent % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += 1
        producer.poll(0)
    producer.flush()


#: librdkafka's own prefetch settings: the peer of the ones kofs.driver_consumer sets.
PREFETCH_DEFAULTS = {"queued.min.messages": "100000", "fetch.queue.backoff.ms": "1000"}


def measure(bootstrap: str, samples: int, gap_s: float = 0.5) -> dict[str, list[float]]:
    """Return the milliseconds of each look-up, ``samples`` times, ``gap_s`` apart (each consumer's look-ups
    are ``gap_s`` plus the sample's own look-ups apart)."""
    consumer = kofs.driver_consumer(bootstrap)
    peer = kofs.driver_consumer(bootstrap, PREFETCH_DEFAULTS)
    times: dict[str, list[float]] = {
        "metadata": [],
        "ListOffsets x4": [],
        "end_offsets": [],
        "end_offsets (prefetch)": [],
    }
    try:
        tps = kofs.partitions_of(consumer, [TOPIC], bootstrap)
        for _ in range(samples):
            time.sleep(gap_s)
            t0 = time.perf_counter()
            kofs.partitions_of(consumer, [TOPIC], bootstrap)
            t1 = time.perf_counter()
            for tp in tps:
                consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            t2 = time.perf_counter()
            kofs.end_offsets(consumer, tps)
            t3 = time.perf_counter()
            kofs.end_offsets(peer, tps)  # its own connection: the consumer's held fetch is not in its way
            t4 = time.perf_counter()
            for name, ms in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                times[name].append(1000 * ms)
    finally:
        consumer.close()
        peer.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=["tansu", "noida"], default="tansu")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--step-records", type=int, default=50_000_000)
    ap.add_argument(
        "--rate", type=float, default=100_000.0, help="records/s written while measuring (0: none)"
    )
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--gap-s", type=float, default=0.5, help="pause between look-ups (0: back to back)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="daggers-bench-offsets-"))
    (port,) = free_ports(1)
    broker = make_broker(args.broker, root / "broker", port)  # type: ignore[arg-type]
    broker.start()
    bootstrap = f"127.0.0.1:{port}"
    print(
        f"broker {args.broker}; {PARTITIONS} partitions; {args.rate:,.0f} records/s written while measuring"
    )
    print("records in topic | look-up | p50 ms | max ms")
    try:
        create_topic(bootstrap, TOPIC, PARTITIONS, kind=args.broker)
        total = 0
        for _ in range(args.steps):
            loaders = [
                mp.Process(target=produce, args=(bootstrap, args.step_records // 2, 0.0)) for _ in range(2)
            ]
            for p in loaders:
                p.start()
            for p in loaders:
                p.join()
            total += args.step_records
            live = mp.Process(target=produce, args=(bootstrap, 10**12, args.rate)) if args.rate else None
            if live:
                live.start()
            try:
                times = measure(bootstrap, args.samples, args.gap_s)
            finally:
                if live:
                    live.terminate()
                    live.join()
            for name, ms in times.items():
                print(f"{total:,} | {name} | {statistics.median(ms):.1f} | {max(ms):.1f}", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
