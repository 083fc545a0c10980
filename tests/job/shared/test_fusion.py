"""What fuses and how a group's plan, generations and rows are made (:mod:`job.shared.fusion`,
:func:`job.shared.group.start_of_generation`); no Spark. The query itself: test_host_fusion.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from job.query.offset_log import committed_watermark_ms
from job.query.plan import DaggerPlan, plan
from job.shared.fusion import (
    MEMBER_COLUMN,
    ROW_COLUMN,
    Branch,
    fusion_key,
    group_plan,
    records_read,
    restart_ms,
    split_rows,
    why_not_fusible,
    window_end_column,
)
from job.shared.group import GROUP_FILE, PLAN_FORM, SPLIT_FILE, solo_key, split_members, start_of_generation
from job.spec import parse_spec
from tests.helpers import BOOKINGS_SQL, booking_spec

HOP_SQL = """SELECT city_id AS tag_city_id, count(1) AS n,
       HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp
FROM data_stream GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), city_id"""
SUM_SQL = """SELECT driver_id AS tag_area, sum(fare_idr) AS amount,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), driver_id"""


def planned(
    tmp_path: Path,
    name: str,
    sql: str = BOOKINGS_SQL,
    extra: str = "",
    topic: str = "bookings",
    bootstrap: str = "127.0.0.1:9092",
) -> DaggerPlan:
    text = booking_spec(
        f"d-{name}",
        topic=topic,
        bootstrap=bootstrap,
        group=name,
        sql=sql,
        settings=f"isolation: fused\n{extra}",
    )
    return plan(parse_spec(text, f"{name}.yaml"), tmp_path / name)


def test_tumble_windows_over_one_stream_fuse_and_the_rest_say_why_not(tmp_path: Path) -> None:
    assert why_not_fusible(planned(tmp_path, "a")) is None
    # a HOP window fuses when its output shows where each window ends (a new generation needs it)
    assert why_not_fusible(planned(tmp_path, "b", HOP_SQL)) is None
    assert window_end_column(planned(tmp_path, "b", HOP_SQL)) == ("window_timestamp", 0)
    starts = HOP_SQL.replace("HOP_END(", "HOP_START(")
    assert window_end_column(planned(tmp_path, "b2", starts)) == ("window_timestamp", 180_000)
    no_time = HOP_SQL.replace(
        ",\n       HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp", ""
    )
    assert (
        why_not_fusible(planned(tmp_path, "b3", no_time))
        == "its HOP window's end or start is not a column of its output"
    )
    passthrough = "SELECT city_id AS tag_city_id, rowtime AS window_timestamp FROM data_stream"
    assert why_not_fusible(planned(tmp_path, "c", passthrough)) is None
    assert fusion_key(planned(tmp_path, "c", passthrough)) != fusion_key(planned(tmp_path, "a"))


JOIN_SQL = """SELECT a.city_id AS tag_city_id, count(1) AS pairs,
       TUMBLE_END(a.rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM bookings AS a JOIN later AS b
  ON a.city_id = b.city_id AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND
GROUP BY TUMBLE(a.rowtime, INTERVAL '60' SECOND), a.city_id"""


def planned_join(tmp_path: Path, name: str, sql: str = JOIN_SQL) -> DaggerPlan:
    body = "\n".join("  " + line for line in sql.splitlines())
    streams = "".join(
        f"""  - table: {table}
    topics: [bookings]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: {name}-{table}
"""
        for table in ("bookings", "later")
    )
    text = f"name: d-{name}\nstreams:\n{streams}sql: |\n{body}\nisolation: fused\nsink:\n  type: log\n"
    return plan(parse_spec(text, f"{name}.yaml"), tmp_path / name)


def test_an_interval_join_under_a_window_fuses_other_joins_do_not(tmp_path: Path) -> None:
    a, b = (
        planned_join(tmp_path, "a"),
        planned_join(tmp_path, "b", JOIN_SQL.replace("count(1)", "max(b.fare_idr)")),
    )
    assert why_not_fusible(a) is None and fusion_key(a) == fusion_key(b) != fusion_key(planned(tmp_path, "c"))
    group = group_plan([a, b], tmp_path / "g" / "gen-1", None)
    assert [s.table for s in group.streams] == ["bookings", "later"]
    unbounded = JOIN_SQL.replace(" AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND", "")
    assert (
        why_not_fusible(planned_join(tmp_path, "d", unbounded))
        == "it joins on something other than a time interval"
    )
    no_window = (
        "SELECT a.city_id AS tag_city_id, b.fare_idr AS fare FROM bookings AS a JOIN later AS b "
        "ON a.city_id = b.city_id AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND"
    )
    assert "its join does not merge" in (why_not_fusible(planned_join(tmp_path, "e", no_window)) or "")


def test_daggers_reading_a_stream_alike_share_a_group_whatever_their_sql(tmp_path: Path) -> None:
    a, b = planned(tmp_path, "a"), planned(tmp_path, "b", SUM_SQL)
    assert fusion_key(a) == fusion_key(b) and fusion_key(a).startswith("g-")
    assert fusion_key(planned(tmp_path, "c", topic="other")) != fusion_key(a)
    assert fusion_key(planned(tmp_path, "d", extra="watermark_delay_ms: 5000\n")) != fusion_key(a)
    assert fusion_key(planned(tmp_path, "e", extra="trigger_interval_s: 2\n")) != fusion_key(a)


def test_a_groups_source_reads_what_every_member_reads_once(tmp_path: Path) -> None:
    a, b = planned(tmp_path, "a"), planned(tmp_path, "b", SUM_SQL)
    group = group_plan([a, b], tmp_path / "g" / "gen-2", "1795708000000")
    source = group.streams[0].source
    assert source.columns == sorted(set(a.streams[0].source.columns) | set(b.streams[0].source.columns))
    assert "fare_idr" in source.columns and "driver_id" in source.columns
    # the S2 cell is derived in the source for a; its coordinates are read only for that
    assert [d[0] for d in source.derived or []] == [d[0] for d in a.streams[0].source.derived or []]
    assert source.hidden == a.streams[0].source.hidden
    assert source.start_from == "1795708000000"
    assert source.bad_records_dir == str(tmp_path / "g" / "gen-2" / "bad_records" / "data_stream")
    # the group's offsets are its checkpoint's: so are the marks of a data loss they read past
    assert source.loss_dir == str(tmp_path / "g" / "gen-2" / "data-loss" / "data_stream")
    assert group.checkpoint == tmp_path / "g" / "gen-2"


def test_a_new_generation_starts_at_the_oldest_open_window_and_counts_no_record_twice(tmp_path: Path) -> None:
    members = {"a": "a-1", "b": "b-1"}
    first = start_of_generation(tmp_path, members, ["60 seconds", None])
    assert (first.number, first.start_ms, first.seen) == (1, None, {})
    spark = tmp_path / "gen-1" / "spark"
    for batch, (watermark, offsets) in enumerate(
        [(0, {"t": {"0": 5}}), (1_795_708_150_000, {"t": {"0": 9, "1": 4}})]
    ):
        (spark / "offsets").mkdir(parents=True, exist_ok=True)
        (spark / "commits").mkdir(parents=True, exist_ok=True)
        (spark / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":{watermark},"batchTimestampMs":1}}\n{json.dumps(offsets)}\n'
        )
        (spark / "commits" / str(batch)).write_text("v1\n{}\n")
    (tmp_path / GROUP_FILE).write_text(
        json.dumps({"generation": 1, "members": members, "start_ms": None, "form": PLAN_FORM})
    )
    assert committed_watermark_ms(spark) == 1_795_708_150_000
    # the same members resume their generation; others start the next one
    assert start_of_generation(tmp_path, members, ["60 seconds", None]).number == 1
    # ... but not a checkpoint of a query of an older form (its state would not fit the query)
    older = {"generation": 1, "members": members, "start_ms": None}
    (tmp_path / GROUP_FILE).write_text(json.dumps(older))
    assert start_of_generation(tmp_path, members, ["60 seconds", None]).number == 2
    (tmp_path / GROUP_FILE).write_text(json.dumps({**older, "form": PLAN_FORM}))
    nxt = start_of_generation(tmp_path, {**members, "c": "c-1"}, ["60 seconds", None])
    assert (nxt.number, nxt.start_ms, nxt.written_ms) == (2, 1_795_708_140_000, 1_795_708_150_000)
    assert nxt.seen == {"t": {"0": 9, "1": 4}}
    # a batch of the new generation from offset 3 to 12 on partition 0: 9..12 are new
    assert records_read({"t": {"0": 3, "1": 4}}, {"t": {"0": 12, "1": 6}}, nxt.seen) == 3 + 2
    assert records_read(json.dumps({"t": {"0": 3}}), json.dumps({"t": {"0": 12}})) == 9


def test_a_member_of_a_split_group_starts_alone_where_the_group_would_have_started_again(
    tmp_path: Path,
) -> None:
    parent, solo = tmp_path / "g-1", tmp_path / solo_key("g-1", "b")
    spark = parent / "gen-3" / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "commits").mkdir(parents=True)
    (spark / "offsets" / "0").write_text(
        'v1\n{"batchWatermarkMs":1795708150000,"batchTimestampMs":1}\n{"t":{"0":9}}\n'
    )
    (spark / "commits" / "0").write_text("v1\n{}\n")
    members = {"a": "a-1", "b": "b-1", "c": "c-1"}
    (parent / GROUP_FILE).write_text(
        json.dumps(
            {
                "generation": 3,
                "members": members,
                "start_ms": 1_795_708_000_000,
                "seen": {"t": {"0": 4}},
                "form": PLAN_FORM,
            }
        )
    )
    (parent / SPLIT_FILE).write_text(json.dumps({"members": members, "error": "Dagger error: …"}))
    assert split_members(parent) == members and split_members(solo) == {}
    # its first generation: from the oldest window the group had open, counting no record twice
    first = start_of_generation(solo, {"b": "b-1"}, ["60 seconds", None], parent)
    assert (first.number, first.start_ms, first.written_ms) == (1, 1_795_708_140_000, 1_795_708_150_000)
    assert first.seen == {"t": {"0": 9}}
    # without a parent (or a parent with no group.json) it starts afresh
    assert start_of_generation(solo, {"b": "b-1"}, ["60 seconds", None]) == start_of_generation(
        solo, {"b": "b-1"}, ["60 seconds", None], tmp_path / "none"
    )
    assert start_of_generation(solo, {"b": "b-1"}, ["60 seconds", None]).start_ms is None
    # a group none of whose members the last generation had starts afresh too
    fresh = start_of_generation(parent, {"d": "d-1"}, ["60 seconds", None])
    assert (fresh.number, fresh.start_ms, fresh.seen) == (4, None, {})


def _generation(folder: Path, number: int, watermark_ms: int, offsets: dict, **data: object) -> None:
    """Write a group's folder whose generation ``number`` committed one batch at ``watermark_ms``."""
    spark = folder / f"gen-{number}" / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "commits").mkdir(parents=True)
    (spark / "offsets" / "0").write_text(
        f'v1\n{{"batchWatermarkMs":{watermark_ms},"batchTimestampMs":1}}\n{json.dumps(offsets)}\n'
    )
    (spark / "commits" / "0").write_text("v1\n{}\n")
    (folder / GROUP_FILE).write_text(json.dumps({"generation": number, "form": PLAN_FORM, **data}))


def test_members_that_come_back_from_groups_of_one_start_at_the_earliest_open_window(tmp_path: Path) -> None:
    minute = 60_000
    base = 1_795_708_080_000  # a minute's start
    group = tmp_path / "g-1"
    # the split generation 3 of a, b, c (windows to base + 1 min written); d joined the group later: gen 4
    _generation(group, 4, base + 3 * minute + 5_000, {"t": {"0": 30}}, members={"d": "d-1"}, start_ms=base)
    # a's group of one is at base + 2 min 30 s; b's wrote one more window (to base + 3 min 10 s)
    _generation(
        tmp_path / solo_key("g-1", "a"),
        1,
        base + 2 * minute + 30_000,
        {"t": {"0": 20}},
        members={"a": "a-1"},
        start_ms=base + minute,
        written_ms=base + minute,
    )
    _generation(
        tmp_path / solo_key("g-1", "b"),
        1,
        base + 3 * minute + 10_000,
        {"t": {"0": 25}},
        members={"b": "b-1"},
        start_ms=base + minute,
        written_ms=base + minute,
    )
    joining = {k: tmp_path / solo_key("g-1", k) for k in ("a", "b")}
    members = {"a": "a-1", "b": "b-1", "d": "d-1"}
    gen = start_of_generation(group, members, ["60 seconds", None], joining=joining)
    # from a's oldest open window; b and d wrote windows after it, which their rows leave out
    assert (gen.number, gen.start_ms, gen.written_ms) == (5, base + 2 * minute, base + 2 * minute + 30_000)
    assert gen.written_by == {"b": base + 3 * minute + 10_000, "d": base + 3 * minute + 5_000}
    # each member counts the records its own query had not read
    assert gen.seen == {"t": {"0": 30}} and gen.seen_by == {"a": {"t": {"0": 20}}, "b": {"t": {"0": 25}}}
    # resumed as it was recorded
    (group / GROUP_FILE).write_text(
        json.dumps(
            {
                "generation": 5,
                "members": members,
                "start_ms": gen.start_ms,
                "seen": gen.seen,
                "written_ms": gen.written_ms,
                "written_by": gen.written_by,
                "seen_by": gen.seen_by,
                "form": PLAN_FORM,
            }
        )
    )
    assert start_of_generation(group, members, ["60 seconds", None], joining=joining) == gen
    # a member with no group of one (its query never started) is taken from the group's own generation
    (group / GROUP_FILE).write_text(
        json.dumps(
            {
                "generation": 3,
                "members": {"a": "a-1", "b": "b-1", "c": "c-1"},
                "start_ms": base,
                "form": PLAN_FORM,
            }
        )
    )
    (group / "gen-3").mkdir()
    alone = start_of_generation(
        group, {"a": "a-1", "b": "b-1"}, ["60 seconds", None], joining={"b": joining["b"]}
    )
    assert (alone.number, alone.start_ms, alone.written_ms) == (4, base, None)
    assert alone.written_by == {"b": base + 3 * minute + 10_000}


@pytest.mark.parametrize(
    ("watermark_s", "window", "start_s"),
    [
        (150, ["60 seconds", None], 120),  # the window [120, 180) is open
        (120, ["60 seconds", None], 120),  # [60, 120) was written; [120, 180) is open
        (150, ["3 minutes", "1 minutes"], 0),  # [0, 180), [60, 240), [120, 300) are open
        (240, ["3 minutes", "1 minutes"], 120),  # [60, 240) was written
    ],
)
def test_a_new_generation_starts_with_the_oldest_window_still_open(
    watermark_s: int, window: list, start_s: int
) -> None:
    assert restart_ms(watermark_s * 1000, window) == start_s * 1000


@pytest.mark.parametrize("rows", [0, 4])
def test_a_groups_rows_go_back_to_each_member_with_its_schema(rows: int) -> None:
    schema_a = pa.schema(
        [("tag_city_id", pa.string()), ("n", pa.int64()), ("window_timestamp", pa.timestamp("us", tz="UTC"))]
    )
    schema_b = pa.schema([("amount", pa.float64())])
    branches = {"a": Branch("a", schema_a), "b": Branch("b", schema_b), "c": Branch("c", schema_a)}
    members = ["a", "b", "a", "a c"][:rows]  # the last row is both a's and c's (the same query)
    json_rows = [
        '{"tag_city_id":"1","n":7,"window_timestamp":"2026-11-26T15:47:00.000000Z"}',
        '{"amount":12.5}',
        '{"tag_city_id":"2","n":1,"window_timestamp":"2026-11-26T15:48:00.000000Z"}',
        '{"tag_city_id":"3","n":2,"window_timestamp":"2026-11-26T15:48:00.000000Z"}',
    ][:rows]
    table = pa.table(
        {MEMBER_COLUMN: pa.array(members, pa.string()), ROW_COLUMN: pa.array(json_rows, pa.string())}
    )
    out = split_rows(table, branches)
    assert out["a"].schema == out["c"].schema == schema_a and out["b"].schema == schema_b
    if rows:
        shared = {"tag_city_id": "3", "n": 2, "window_timestamp": datetime(2026, 11, 26, 15, 48, tzinfo=UTC)}
        assert out["a"].to_pylist() == [
            {"tag_city_id": "1", "n": 7, "window_timestamp": datetime(2026, 11, 26, 15, 47, tzinfo=UTC)},
            {"tag_city_id": "2", "n": 1, "window_timestamp": datetime(2026, 11, 26, 15, 48, tzinfo=UTC)},
            shared,
        ]
        assert out["b"].to_pylist() == [{"amount": 12.5}]
        assert out["c"].to_pylist() == [shared]
    else:
        assert out["a"].num_rows == out["b"].num_rows == out["c"].num_rows == 0
