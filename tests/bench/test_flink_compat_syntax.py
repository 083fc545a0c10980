"""The golden rows Flink gave for bench/flink_compat/cases_syntax.py's cases hit the edges they were made for,
checked against the events by hand (no services: tests/bench/test_flink_compat.py runs the cases as daggers)."""

from __future__ import annotations

from typing import Any

from bench.flink_compat.cases import CLOSER, CUT, DATASETS
from bench.flink_compat.cases_syntax import syntax_cases
from bench.flink_compat.flink_side import read_golden
from bench.flink_compat.rows import canonical, closed, value

CUT_TEXT = value(CUT)


def rows(case_id: str) -> list[list[Any]]:
    return closed(read_golden(case_id)["rows"], CUT_TEXT, CLOSER)


def t(minute: int, second: int = 0, milli: int = 0) -> str:
    return f"2026-03-02 10:{minute:02d}:{second:02d}.{milli:03d}000"


def test_every_syntax_case_has_flinks_rows() -> None:
    for c in syntax_cases():
        assert read_golden(c.id)["flink_sql"] == c.flink_text, (
            f"{c.id}: rerun python -m bench.flink_compat {c.id}"
        )


def test_cumulating_windows_count_a_late_event_only_in_those_still_open() -> None:
    # l5 (10:00:58) came behind the watermark but before 10:02 closed: in every window; l9 (10:01:59.999) came
    # after the watermark passed 10:02: not in [10:00, 10:02), in the two wider windows
    assert rows("tvf-cumulate-late") == canonical(
        [[t(0), t(2), 2100, 6], [t(0), t(4), 4500, 9], [t(0), t(6), 4500, 9]]
    )


def test_window_time_is_the_windows_end_less_a_millisecond() -> None:
    assert {(r[0], r[2]) for r in rows("tvf-tumble")} == {
        (t(0), t(0, 59, 999)),
        (t(1), t(1, 59, 999)),
        (t(4), t(4, 59, 999)),
    }
    assert {r[0] for r in rows("tvf-window-time-out")} == {t(0, 59, 999), t(1, 59, 999), t(4, 59, 999)}


def test_a_hop_without_aggregation_gives_each_event_twice() -> None:
    got = rows("tvf-hop-rows")
    assert len(got) == 2 * 7
    assert sorted(r[1] for r in got if r[0] == "o3") == ["2026-03-02 09:59:00.000000", t(0)]  # 10:00:59.999


def test_first_rows_are_the_earliest_not_late_rows() -> None:
    assert rows("dedup-first-row") == canonical(
        [["o1", "c1", t(0, 5)], ["o2", "c2", t(0, 40)], ["o4", "c3", t(1)], ["o6", "c4", t(4, 10)]]
    )
    assert rows("dedup-late") == canonical([["l1", "d1", 100], ["l3", "d2", 300]])  # l6 (d3) came late
    assert rows("dedup-out-of-order") == canonical(
        [["a2", "c1", "COMPLETED"], ["a3", "c2", "CREATED"], ["a5", "c3", "CREATED"], ["a8", "c4", "CREATED"]]
    )
    assert [e["order_number"] for e in DATASETS["dedup"]["bookings"]][:2] == ["a1", "a2"]  # a2 read second
