"""job.sources.kafka.pack_ranges: small ranges of a micro-batch share a task; big ones keep their own."""

from __future__ import annotations

from job.sources.kafka import (
    KafkaStreamReader,
    OffsetRange,
    RangeGroup,
    SourceConfig,
    pack_ranges,
    source_options,
)


def rng(part: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, part, start, end)


def records(task: object) -> int:
    ranges = task.ranges if isinstance(task, RangeGroup) else (task,)
    return sum(r.end - r.start for r in ranges)  # type: ignore[union-attr]


def test_a_light_batch_is_one_task_reading_every_range_in_partition_order() -> None:
    ranges = [rng(2, 10, 35), rng(0, 0, 25), rng(3, 5, 30), rng(1, 7, 32)]
    tasks = pack_ranges(ranges, 20_000)
    assert len(tasks) == 1 and isinstance(tasks[0], RangeGroup)
    assert [(r.partition, r.start, r.end) for r in tasks[0].ranges] == [
        (0, 0, 25),
        (1, 7, 32),
        (2, 10, 35),
        (3, 5, 30),
    ]
    assert tasks[0].value == tuple(r.value for r in tasks[0].ranges)


def test_tasks_follow_the_record_count_and_stay_balanced() -> None:
    ranges = [rng(p, 0, n) for p, n in enumerate([30_000, 10_000, 10_000, 5_000, 5_000])]  # 60,000 records
    tasks = pack_ranges(ranges, 20_000)
    assert sorted(records(t) for t in tasks) == [15_000, 15_000, 30_000]
    assert sorted(r.partition for t in tasks for r in (t.ranges if isinstance(t, RangeGroup) else (t,))) == [
        0,
        1,
        2,
        3,
        4,
    ]  # every range read exactly once
    assert [t for t in tasks if not isinstance(t, RangeGroup)] == [
        rng(0, 0, 30_000)
    ]  # alone: the range itself


def test_heavy_or_single_ranges_are_left_alone() -> None:
    heavy = [rng(p, 0, 25_000) for p in range(4)]
    assert pack_ranges(heavy, 20_000) == heavy
    assert pack_ranges([rng(0, 0, 3)], 20_000) == [rng(0, 0, 3)]
    assert pack_ranges([], 20_000) == []
    assert pack_ranges([rng(0, 0, 3), rng(1, 0, 3)], 0) == [rng(0, 0, 3), rng(1, 0, 3)]  # 0 turns packing off


def test_the_stream_reader_packs_a_small_batch_but_never_rejoins_a_split_partition() -> None:
    cfg = SourceConfig(
        bootstrap_servers="127.0.0.1:1",
        topics=["t"],
        proto_class="x",
        descriptor_set_b64="",
        columns=[],
        split_records=10,
    )
    reader = KafkaStreamReader(cfg)
    tasks = reader.partitions({"t": {"0": 0, "1": 0}}, {"t": {"0": 4, "1": 3}})
    assert len(tasks) == 1 and [(r.partition, r.start, r.end) for r in tasks[0].ranges] == [
        (0, 0, 4),
        (1, 0, 3),
    ]
    split = reader.partitions({"t": {"0": 0}}, {"t": {"0": 25}})
    assert [(r.start, r.end, r.anchor) for r in split] == [(0, 10, 0), (10, 20, 0), (20, 25, 0)]


def test_max_tasks_caps_a_heavy_batch_and_keeps_every_range_once() -> None:
    heavy = [rng(p, 0, 25_000 + p) for p in range(4)]
    tasks = pack_ranges(heavy, 20_000, max_tasks=2)
    assert len(tasks) == 2 and all(isinstance(t, RangeGroup) for t in tasks)
    assert sorted(records(t) for t in tasks) == [50_003, 50_003]  # balanced, largest first: 3+0, 2+1
    assert sorted((r.partition, r.end) for t in tasks for r in t.ranges) == [
        (p, 25_000 + p) for p in range(4)
    ]
    assert pack_ranges(heavy, 0, max_tasks=3) != heavy and len(pack_ranges(heavy, 0, max_tasks=3)) == 3
    assert pack_ranges(heavy, 20_000, max_tasks=4) == heavy  # as many slots as ranges: nothing to pack
    cfg = SourceConfig(
        bootstrap_servers="127.0.0.1:1",
        topics=["t"],
        proto_class="x",
        descriptor_set_b64="",
        columns=[],
        split_records=10,
        max_tasks=2,
    )
    assert SourceConfig.from_options({k.lower(): v for k, v in source_options(cfg).items()}).max_tasks == 2
    split = KafkaStreamReader(cfg).partitions({"t": {"0": 0}}, {"t": {"0": 35}})
    assert len(split) == 2 and sorted(records(t) for t in split) == [15, 20]
