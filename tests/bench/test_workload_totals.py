"""Workload (d), API totals: its expected points by plain Python, and a query whose source aggregates first."""

from __future__ import annotations

from collections import defaultdict

from bench.workloads import BENCH_START, WORKLOADS, api_logs
from job.sql import translate


def test_api_totals_expected_points_are_each_windows_count_sum_least_and_greatest() -> None:
    w = WORKLOADS["d"]
    batch = api_logs(3_000, 4, BENCH_START, 20.0)
    groups: dict[tuple, list[float]] = defaultdict(list)
    for row in batch.table.to_pylist():
        end = int(row["event_timestamp"].timestamp()) // 60 * 60 + 60
        groups[(end, row["path"], str(row["status_code"]))].append(row["latency_ms"])
    got = w.expected(batch.table)
    assert got.keys() == groups.keys() and len(got) > 10
    for key, values in groups.items():
        n, total, least, most = got[key]
        assert (n, least, most) == (len(values), min(values), max(values))
        assert abs(total - sum(values)) <= 1e-9 * max(1.0, abs(total))


def test_api_totals_let_the_source_aggregate_first() -> None:
    columns = {"path": "string", "status_code": "int", "latency_ms": "double", "event_timestamp": "timestamp"}
    t = translate(WORKLOADS["d"].sql, {"data_stream": columns}, partial=True)
    assert t.partial["data_stream"].keys == ["path", "status_code"]
    assert "SUM(__dagger_records) AS requests" in t.spark_sql
