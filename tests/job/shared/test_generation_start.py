"""Where a fused group's next generation starts reading (job.shared.group.generation_start), on a real tansu
broker: back from the offsets the last generation had read, by record time, to the oldest open window's first
record. Tansu answers offsets for times by the broker's append time of each record batch: a backlog loaded
after its events (every event older than its append) answered offset 0, and the member read the whole topic
again (1.8 M records: lag 0 -> 1,820,019)."""

from __future__ import annotations

import bisect
import json
from pathlib import Path

from confluent_kafka import Producer

from job.query.plan import plan
from job.shared.fusion import group_plan, restart_ms
from job.shared.group import GROUP_FILE, PLAN_FORM, generation_start, start_of_generation
from job.sources.align import Key, first_stamped
from job.sources.kafka import KafkaStreamReader
from job.spec import parse_spec
from job.stack.broker import create_topic
from tests.helpers import BOOKINGS_SQL, booking_spec, send_one, unique

T0_MS = 1_772_442_000_000  # 2026-03-02 09:00 UTC, a minute boundary, long before the records' append
PER_PARTITION = {0: 30_000, 1: 20_000}  # records over 10 minutes of event time
SPAN_MS = 600_000


def stamps(partition: int) -> list[int]:
    """The event times of a partition's records, in order."""
    n = PER_PARTITION[partition]
    return [T0_MS + partition * 7 + i * SPAN_MS // n for i in range(n)]


def write_stamped(broker: str, topic: str, written: dict[int, list[int]]) -> None:
    """Write one small record a time in ``written[p]`` (Kafka timestamps, ms) to each partition ``p``."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50, "batch.num.messages": 10_000})
    for p, times in written.items():
        for ts in times:
            send_one(producer, topic, b"x" * 40, None, p, ts)
    assert producer.flush(60) == 0


def test_the_search_looks_back_from_the_end_and_finds_the_first_record_at_or_after_a_time() -> None:
    parts = {"0": [1, 2, 2, 5, 7, 7, 9], "1": [3, 3, 3], "2": [10, 11]}
    asked: list[dict[Key, int]] = []

    def times_at(want: dict[Key, int]) -> dict[Key, int]:
        asked.append(dict(want))
        return {k: parts[k[1]][off] for k, off in want.items() if off < len(parts[k[1]])}

    lows = {("t", p): 0 for p in parts}
    highs = {("t", p): len(ts) for p, ts in parts.items()}
    # at 7: offset 4 on partition 0; partition 1 has none that new (its end); partition 2 from its low
    assert first_stamped(times_at, 7, lows, highs) == {("t", "0"): 4, ("t", "1"): 3, ("t", "2"): 0}
    assert asked[0] == {("t", "0"): 6, ("t", "1"): 2, ("t", "2"): 1}  # each partition's last record first
    assert first_stamped(times_at, 2, lows, {**highs, ("t", "0"): 5}) == {
        ("t", "0"): 1,
        ("t", "1"): 0,
        ("t", "2"): 0,
    }
    # never past high; an empty range answers its high; a record with no time answers low
    assert first_stamped(times_at, 100, {("t", "0"): 2}, {("t", "0"): 2}) == {("t", "0"): 2}
    assert first_stamped(lambda want: {}, 7, lows, highs) == lows


def test_a_groups_next_generation_reads_from_the_oldest_open_window_not_from_offset_zero(
    tansu_broker: str, tmp_path: Path
) -> None:
    topic = unique("gen")
    create_topic(tansu_broker, topic, len(PER_PARTITION))
    write_stamped(tansu_broker, topic, {p: stamps(p) for p in PER_PARTITION})
    ends = {topic: {str(p): n for p, n in PER_PARTITION.items()}}

    def member(name: str):  # type: ignore[no-untyped-def]
        text = booking_spec(
            f"d-{name}",
            topic=topic,
            bootstrap=tansu_broker,
            group="g",
            sql=BOOKINGS_SQL,
            settings="isolation: fused\nwatermark_delay_ms: 10000\n",
        )
        return plan(parse_spec(text, f"{name}.yaml"), tmp_path / name)

    fa, fb = member("fa"), member("fb")
    window = list(fb.translation.window)
    # the pair's first generation read everything (lag 0) up to a watermark 10 s behind its newest event
    folder = tmp_path / "groups" / "g"
    watermark = T0_MS + SPAN_MS - 10_000
    spark = folder / "gen-1" / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "commits").mkdir(parents=True)
    (spark / "offsets" / "0").write_text(
        f'v1\n{{"batchWatermarkMs":{watermark},"batchTimestampMs":1}}\n{json.dumps(ends)}\n'
    )
    (spark / "commits" / "0").write_text("v1\n{}\n")
    (folder / GROUP_FILE).write_text(
        json.dumps({"generation": 1, "members": {"fa": "fa-1", "fb": "fb-1"}, "form": PLAN_FORM})
    )
    # fa stopped: fb goes on in the group's next generation
    gen = start_of_generation(folder, {"fb": "fb-1"}, window)
    assert (gen.number, gen.start_ms, gen.seen) == (2, restart_ms(watermark, window), ends)
    start_from = generation_start(fb, window, gen.start_ms, gen.seen)
    source = group_plan([fb], folder / "gen-2", start_from).streams[0].source
    reader = KafkaStreamReader(source)
    try:
        first = reader.initialOffset()
    finally:
        reader.stop()
    # the first record of each partition stamped at or after the oldest open window's start, less the
    # watermark delay (a record out of order by less is not missed): the last 70 s of 600
    at_ms = gen.start_ms - 10_000
    want = {topic: {str(p): bisect.bisect_left(stamps(p), at_ms) for p in PER_PARTITION}}
    assert first == want
    assert want == {topic: {"0": 26_500, "1": 17_667}}
    assert fa.spec.watermark_delay_ms == 10_000


def test_the_search_back_passes_a_tail_older_than_the_partitions_middle() -> None:
    # partition 0 rises to 99, then ends in a copy of its first 37 records; partition 1 rises to 59, then
    # ends in a burst of older records (30, then 40-44); partition 2 rises to 60, then ends in 0-8
    run = list(range(100))
    parts = {
        "0": run + run[:37],
        "1": list(range(60)) + [30] * 3 + list(range(40, 45)),
        "2": run[:61] + run[:9],
    }
    lows = {("t", p): 0 for p in parts}
    highs = {("t", p): len(ts) for p, ts in parts.items()}

    def times_at(want: dict[Key, int]) -> dict[Key, int]:
        return {k: parts[k[1]][off] for k, off in want.items() if off < len(parts[k[1]])}

    # at 50: each partition's record 50 (the search back met the old tails first: it answered their ends)
    assert first_stamped(times_at, 50, lows, highs) == {("t", "0"): 50, ("t", "1"): 50, ("t", "2"): 50}
    # at 70: partition 0's record 70; none on 1 or 2 (their ends)
    assert first_stamped(times_at, 70, lows, highs) == {("t", "0"): 70, ("t", "1"): 68, ("t", "2"): 70}


def test_a_partition_that_ends_in_older_records_is_read_again_from_the_open_window(
    tansu_broker: str, tmp_path: Path
) -> None:
    """Partition 0 ends in a copy of its first 12,000 records (times 0-4 min, after its 10 min): the search
    back met that tail first, took the whole partition as older than the open window and started the next
    generation at its end: the open window's records were never read again (fa lost window 09:29)."""
    topic = unique("gen")
    create_topic(tansu_broker, topic, len(PER_PARTITION))
    written = {0: stamps(0) + stamps(0)[:12_000], 1: stamps(1)}
    write_stamped(tansu_broker, topic, written)
    ends = {topic: {str(p): len(times) for p, times in written.items()}}
    text = booking_spec(
        "d-fb",
        topic=topic,
        bootstrap=tansu_broker,
        group="g",
        sql=BOOKINGS_SQL,
        settings="isolation: fused\nwatermark_delay_ms: 10000\n",
    )
    fb = plan(parse_spec(text, "fb.yaml"), tmp_path / "fb")
    window = list(fb.translation.window)
    start_ms = restart_ms(T0_MS + SPAN_MS - 10_000, window)
    first = json.loads(generation_start(fb, window, start_ms, ends) or "{}")
    at_ms = start_ms - 10_000
    want = {topic: {str(p): bisect.bisect_left(stamps(p), at_ms) for p in PER_PARTITION}}
    assert first == want == {topic: {"0": 26_500, "1": 17_667}}  # {"0": 42_000, ...} before
