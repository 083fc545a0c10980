"""A failed query's error, as the CLI and the console show it: the DaggerError raised in a UDF, on an executor
or in ``foreachBatch`` with its class, message and hint; Spark's own error as its condition and message."""

from __future__ import annotations

import re
from typing import Any

import pytest

from job.errors import BadRecordError, DaggerError, SinkError, SourceError
from job.spark.failure import error_in_traceback, explain_failure, final_exception, raised_at, rebuild

CHAINED = """Traceback (most recent call last):
  File "/x/a.py", line 3, in f
    raise KeyError("k")
KeyError: 'k'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/a.py", line 5, in f
    raise SinkError("cannot reach it", hint="is it up?")
job.errors.SinkError: cannot reach it
  hint: is it up?
 SQLSTATE: 39000"""


def test_the_final_exception_of_a_traceback_is_rebuilt_with_its_class() -> None:
    err = error_in_traceback(CHAINED)
    assert type(err) is SinkError
    assert (err.title, err.message, err.hint) == ("Sink error", "cannot reach it", "is it up?")
    assert error_in_traceback(CHAINED.replace("job.errors.SinkError", "ValueError")) is None
    assert error_in_traceback(CHAINED.replace("job.errors.SinkError", "os.SinkError")) is None  # not ours


def test_where_a_traceback_raised_is_its_last_frame() -> None:
    assert raised_at(CHAINED) == " (in a.py line 5, f)"  # the last traceback's: the handler that raised
    assert raised_at("ValueError: no traceback") == ""


def test_a_spark_error_raised_in_python_is_its_first_line_not_the_generated_sql() -> None:
    text = """Traceback (most recent call last):
  File "/x/runner.py", line 331, in _write_batch
    self.write_rows(df.toArrow(), batch_id)
pyspark.errors.exceptions.captured.ArithmeticException: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012
== SQL (line 1, position 22) ==
SELECT order_number, fare_idr DIV (city_id - 1) AS q FROM bookings
                     ^^^^^^^^^^^^^^^^^^^^^^^^^^
"""
    found = final_exception(text)
    assert found is not None
    assert found[0] == (
        "pyspark.errors.exceptions.captured.ArithmeticException: [DIVIDE_BY_ZERO] Division by zero. "
        "SQLSTATE: 22012"
    )
    assert final_exception(CHAINED) == (
        "job.errors.SinkError: cannot reach it",
        ["  hint: is it up?", " SQLSTATE: 39000"],
    )


def test_a_class_that_needs_more_arguments_is_its_parent_with_its_title() -> None:
    err = rebuild(
        BadRecordError, "cannot decode the record at topic 't' partition 0 offset 7: bad", "skip it"
    )
    assert type(err) is SourceError and err.title == "Bad record" and err.hint == "skip it"


def _raising(error: BaseException) -> Any:
    from pyspark.sql.functions import udf

    @udf("int")
    def fails(_):  # type: ignore[no-untyped-def]  # annotated, Spark would warn it cannot read the eval type
        raise error

    return fails


@pytest.mark.integration
def test_a_dagger_error_in_a_udf_keeps_its_class_and_hint(spark: Any) -> None:
    from pyspark.sql.functions import col

    with pytest.raises(Exception) as info:
        spark.range(1).select(_raising(SinkError("cannot reach it", hint="is it up?"))(col("id"))).collect()
    err = explain_failure(info.value)
    assert type(err) is SinkError
    assert (err.message, err.hint) == ("cannot reach it", "is it up?")
    with pytest.raises(Exception) as info:
        spark.range(1).select(_raising(ValueError("a bug"))(col("id"))).collect()
    err = explain_failure(info.value)
    assert type(err) is DaggerError
    assert re.fullmatch(  # and where: a udf_file's function names its file, line and function
        r"the streaming query failed: ValueError: a bug \(in test_spark_failure\.py line \d+, fails\)",
        err.message,
    ), err.message


@pytest.mark.integration
def test_a_streaming_query_failed_in_foreach_batch(spark: Any) -> None:
    raised = SinkError("the server refused batch 0", hint="check its log")

    def write(_df: Any, _batch_id: int) -> None:
        raise raised

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .writeStream.foreachBatch(write)
        .start()
    )
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(300)
    finally:
        query.stop()
    assert explain_failure(info.value, raised) is raised  # the object the job kept
    err = explain_failure(info.value)  # from py4j's traceback of the callback
    assert type(err) is SinkError
    assert (err.message, err.hint) == ("the server refused batch 0", "check its log")
    assert explain_failure(query.exception()).message == "the server refused batch 0"


@pytest.mark.integration
def test_spark_own_error_is_its_condition_and_message(spark: Any) -> None:
    with pytest.raises(Exception) as info:
        spark.sql("SELECT nosuchfunction(2) AS b")
    err = explain_failure(info.value)
    assert type(err) is DaggerError
    assert err.message == (
        "the streaming query failed: [UNRESOLVED_ROUTINE] Cannot resolve routine `nosuchfunction` on "
        "search path [`system`.`builtin`, `system`.`session`, `spark_catalog`.`default`]. "
        "SQLSTATE: 42883"
    )
