"""The records a micro-batch drops as late, from its records per window (job.query.late) and which queries
they can be counted for (job.sql.lateness). No Spark: progress reports as Spark writes them."""

from __future__ import annotations

import pytest

from job.query.late import METRIC, late_records, observed_windows
from job.sql import translate

STREAM = {"s": {"k": "string", "n": "int", "event_timestamp": "timestamp"}}
TUMBLE = "TUMBLE(rowtime, INTERVAL '60' SECOND)"
MINUTE_US = 60_000_000
T = 1_772_438_400 * 1_000_000  # 2026-03-02T08:00:00Z in microseconds


def test_a_batch_drops_the_records_of_windows_ending_at_or_before_the_previous_watermark() -> None:
    p = {
        "observedMetrics": {
            f"{METRIC}_0": {"windows": f"{T}:7,{T + MINUTE_US}:5,{T + 2 * MINUTE_US}:11"},
            f"{METRIC}_1": {"windows": f"{T}:2"},
            "dagger_records_0": {"records": 3},
        }
    }
    windows = observed_windows(p)
    assert windows == {T: 9, T + MINUTE_US: 5, T + 2 * MINUTE_US: 11}
    # a window ending at the watermark is dropped, one ending a millisecond after it is not
    assert late_records(windows, "2026-03-02T08:01:00.000Z") == 9 + 5
    assert late_records(windows, "2026-03-02T08:00:59.999Z") == 9
    assert late_records(windows, "2026-03-02T07:59:59.999Z") == 0
    assert late_records(windows, None) == 0  # no watermark yet: nothing is late
    assert observed_windows({"observedMetrics": {f"{METRIC}_0": {"windows": ""}}}) == {}
    assert observed_windows({"numInputRows": 4}) is None  # not observed: Spark's own figure counts


@pytest.mark.parametrize(
    ("sql", "window_ms"),
    [
        (f"SELECT k, COUNT(*) AS c FROM s GROUP BY {TUMBLE}, k", 60_000),
        (f"SELECT UPPER(k) AS u, SUM(n) AS c FROM s GROUP BY {TUMBLE}, UPPER(k) HAVING SUM(n) > 1", 60_000),
        # a filter drops records before the aggregation: those it keeps are counted (late_where)
        (f"SELECT COUNT(*) AS c FROM s WHERE n > 1 GROUP BY {TUMBLE}", 60_000),
        # unless it calls a function (a UDF would run twice a record)
        (f"SELECT COUNT(*) AS c FROM s WHERE UPPER(k) = 'A' GROUP BY {TUMBLE}", None),
        # a record in several windows
        (
            "SELECT COUNT(*) AS c FROM s GROUP BY HOP(rowtime, INTERVAL '10' SECOND, INTERVAL '60' SECOND)",
            None,
        ),
        ("SELECT k FROM s", None),
    ],
)
def test_late_records_are_counted_per_window_for_one_streams_tumble_aggregation(
    sql: str, window_ms: int | None
) -> None:
    assert translate(sql, STREAM).late_window_ms == window_ms
    assert translate(sql, STREAM, partial=True).late_window_ms == window_ms


@pytest.mark.parametrize(
    ("where", "kept"),
    [
        ("n > 1", "n > 1"),
        (
            "t.k IN ('a', 'b') AND n BETWEEN 1 AND 5 OR NOT n IS NULL",
            "(k IN ('a', 'b') AND n BETWEEN 1 AND 5 OR NOT n IS NULL)",
        ),
        ("k LIKE 'a%' AND CAST(n AS DOUBLE) > 1.5", "k LIKE 'a%' AND TRY_CAST(n AS DOUBLE) > 1.5"),
        ("UPPER(k) = 'A'", None),
    ],
)
def test_the_where_that_keeps_the_late_records_counted_reads_the_streams_view(
    where: str, kept: str | None
) -> None:
    """The WHERE without the engine's watermark barrier and table names: Spark SQL over the stream's view."""
    translation = translate(f"SELECT COUNT(*) AS c FROM s AS t WHERE {where} GROUP BY {TUMBLE}", STREAM)
    assert translation.late_where == kept
    assert "__dagger_wm" in translation.spark_sql  # the barrier is in the query, not in the observed WHERE
