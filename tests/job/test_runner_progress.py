"""A dagger killed after Spark committed a batch but before its progress was counted: the next start
counts that batch from the checkpoint's offset log (Spark does not run it again)."""

from __future__ import annotations

import json
from pathlib import Path

from job.query.runner import committed_since, shown_watermark

META = '{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}'


def _batch(spark: Path, batch: int, *sources: dict[str, object], commit: bool = True) -> None:
    (spark / "offsets").mkdir(parents=True, exist_ok=True)
    (spark / "commits").mkdir(parents=True, exist_ok=True)
    lines = ["v1", META, *(json.dumps(s) for s in sources)]
    (spark / "offsets" / str(batch)).write_text("\n".join(lines))
    if commit:
        (spark / "commits" / str(batch)).write_text("v1\n{}")


def test_committed_but_unreported_batches_are_counted_from_offsets(tmp_path: Path) -> None:
    spark = tmp_path / "spark"
    _batch(spark, 0, {"t": {"0": 10, "1": 5}})
    _batch(spark, 1, {"t": {"0": 40, "1": 25}, "@cluster": "primary"})
    _batch(spark, 2, {"t": {"0": 100, "1": 25}, "@tick": 4})  # a gathering source's tick: not a topic
    _batch(spark, 3, {"t": {"0": 160, "1": 30}}, commit=False)  # planned, not committed: Spark runs it again
    assert committed_since(spark, 0) == (30 + 20 + 60, 2)
    assert committed_since(spark, 1) == (60, 2)
    assert committed_since(spark, 2) == (0, 2)
    assert committed_since(spark, -1) == (0, -1)  # nothing reported yet: nothing to add


def test_two_streams_and_a_missing_offset_file(tmp_path: Path) -> None:
    spark = tmp_path / "spark"
    _batch(spark, 4, {"a": {"0": 1}}, {"b": {"0": 7}})
    _batch(spark, 5, {"a": {"0": 3}}, {"b": {"0": 10}})
    assert committed_since(spark, 4) == (2 + 3, 5)
    (spark / "offsets" / "4").unlink()
    assert committed_since(spark, 4) == (0, 4)  # cannot tell: counts nothing
    assert committed_since(tmp_path / "nothing", 3) == (0, 3)


def test_a_batch_line_says_there_is_no_watermark_yet_instead_of_1970() -> None:
    assert shown_watermark("1970-01-01T00:00:00.000Z") == "none yet"
    assert shown_watermark(None) == "none yet"
    assert shown_watermark("2026-11-29T07:55:48.794Z") == "2026-11-29T07:55:48.794Z"


def test_a_batch_counts_the_records_its_streams_observed_not_the_rows_spark_got() -> None:
    """A source that aggregates first (job.sql.partial) hands Spark one row per group, each with the records it
    stands for, which the stream's frame adds up (Spark's observed metrics)."""
    from job.query.runner import RECORDS_METRIC, observed_records

    assert observed_records({"numInputRows": 7}) is None  # nothing observed: count the rows
    observed = {
        f"{RECORDS_METRIC}_0": {"records": 30},
        f"{RECORDS_METRIC}_1": {"records": 12},
        "other": {"x": 1},
    }
    assert observed_records({"numInputRows": 7, "observedMetrics": observed}) == 42
    assert observed_records({"observedMetrics": {f"{RECORDS_METRIC}_0": {"records": None}}}) == 0
