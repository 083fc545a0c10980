"""Which functions Dagger SQL knows: Spark's built-ins, the Dagger library, and a dagger's own functions.

Each Dagger function is described once here (kind, signature, how many arguments it takes, and
whether it runs as Spark built-ins after an AST rewrite or as an Arrow UDF). ``docs/functions.md``
is the long reference; ``tests/job/sql/test_catalog.py`` checks that both name the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Kind = Literal["scalar", "aggregate", "table", "window", "window_property", "rowtime"]
Impl = Literal["rewrite", "udf", "window"]


@dataclass(frozen=True)
class DaggerFunction:
    """A function of the Dagger library as SQL sees it."""

    name: str
    kind: Kind
    signature: str
    doc: str
    arity: tuple[int, ...]  # the argument counts it accepts
    impl: Impl = "rewrite"  # rewrite: Spark built-ins (JVM); udf: a vectorised Arrow UDF
    columns: tuple[str, ...] = ()  # table functions: the default names of the columns they add

    def arity_text(self) -> str:
        """Return ``'3 arguments'`` or ``'2 or 4 arguments'`` for error messages."""
        if len(self.arity) > 4:  # variadic: groups of (key, value) or (key, value, type), or any count
            step = self.arity[1] - self.arity[0]
            if step == 1:
                return f"{self.arity[0]} or more arguments"
            return f"{self.arity[0]}, {self.arity[1]}, … arguments (groups of {step})"
        counts = [str(n) for n in self.arity]
        text = counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " or " + counts[-1]
        return f"{text} argument{'s' if self.arity != (1,) else ''}"


def _f(
    name: str,
    kind: Kind,
    signature: str,
    doc: str,
    arity: tuple[int, ...],
    impl: Impl = "rewrite",
    columns: tuple[str, ...] = (),
) -> DaggerFunction:
    return DaggerFunction(name, kind, signature, doc, arity, impl, columns)


_LIBRARY = [
    # windows and their properties
    _f(
        "TUMBLE",
        "window",
        "TUMBLE(rowtime, INTERVAL 'n' unit)",
        "GROUP BY item: fixed, non-overlapping windows of the given size.",
        (2,),
        "window",
    ),
    _f(
        "HOP",
        "window",
        "HOP(rowtime, INTERVAL slide, INTERVAL size)",
        "GROUP BY item: sliding windows of `size` every `slide` (Flink's order: slide, then size).",
        (3,),
        "window",
    ),
    _f(
        "TUMBLE_START",
        "window_property",
        "TUMBLE_START(rowtime, INTERVAL 'n' unit)",
        "The inclusive start of the row's tumbling window.",
        (2,),
        "window",
    ),
    _f(
        "TUMBLE_END",
        "window_property",
        "TUMBLE_END(rowtime, INTERVAL 'n' unit)",
        "The exclusive end of the row's tumbling window.",
        (2,),
        "window",
    ),
    _f(
        "TUMBLE_ROWTIME",
        "rowtime",
        "TUMBLE_ROWTIME(rowtime, INTERVAL 'n' unit)",
        "The window's last instant (end - 1 ms) as an event time that an outer window can group by.",
        (2,),
        "window",
    ),
    _f(
        "HOP_START",
        "window_property",
        "HOP_START(rowtime, slide, size)",
        "The inclusive start of the row's sliding window.",
        (3,),
        "window",
    ),
    _f(
        "HOP_END",
        "window_property",
        "HOP_END(rowtime, slide, size)",
        "The exclusive end of the row's sliding window.",
        (3,),
        "window",
    ),
    _f(
        "HOP_ROWTIME",
        "rowtime",
        "HOP_ROWTIME(rowtime, slide, size)",
        "The sliding window's last instant (end - 1 ms) as an event time for an outer window.",
        (3,),
        "window",
    ),
    _f(
        "SESSION",
        "window",
        "SESSION(rowtime, INTERVAL gap)",
        "GROUP BY item: a window per run of rows with no gap longer than `gap` between them.",
        (2,),
        "window",
    ),
    _f(
        "SESSION_START",
        "window_property",
        "SESSION_START(rowtime, INTERVAL gap)",
        "The inclusive start of the row's session window (its first event).",
        (2,),
        "window",
    ),
    _f(
        "SESSION_END",
        "window_property",
        "SESSION_END(rowtime, INTERVAL gap)",
        "The exclusive end of the row's session window (its last event + gap).",
        (2,),
        "window",
    ),
    _f(
        "SESSION_ROWTIME",
        "rowtime",
        "SESSION_ROWTIME(rowtime, INTERVAL gap)",
        "The session window's last instant (end - 1 ms) as an event time for an outer window.",
        (2,),
        "window",
    ),
    # geo
    _f(
        "S2Id",
        "scalar",
        "S2Id(lat DOUBLE, long DOUBLE, level INT) -> STRING",
        "The S2 cell containing the point at `level` (0-30), as the decimal string of the signed 64-bit "
        "cell id (Java long, as the original platform). NULL for a NULL input.",
        (3,),
        "udf",
    ),
    _f(
        "S2AreaInKm2",
        "scalar",
        "S2AreaInKm2(s2id STRING) -> DOUBLE",
        "The exact area of an S2 cell in km² (signed or unsigned decimal id).",
        (1,),
        "udf",
    ),
    _f(
        "GeoHash",
        "scalar",
        "GeoHash(lat DOUBLE, long DOUBLE, length INT) -> STRING",
        "The geohash of the point with `length` characters (1-12).",
        (3,),
        "udf",
    ),
    _f(
        "Distance",
        "scalar",
        "Distance(lat1, long1, lat2, long2) -> DOUBLE",
        "Great-circle distance in km (haversine, Earth radius 6371 km).",
        (4,),
    ),
    # collections
    _f(
        "ElementAt",
        "scalar",
        "ElementAt(array, index) | ElementAt(array, path_of_array, index, path[, table]) -> STRING",
        "The element at a 0-based index (negative: from the end) as a string; NULL when out of range.",
        (2, 4, 5),
    ),
    _f(
        "MapGet",
        "scalar",
        "MapGet(map, key) -> value",
        "The value of `key` in a map; NULL when missing.",
        (2,),
    ),
    _f(
        "ListContains",
        "scalar",
        "ListContains(array, item) -> BOOLEAN",
        "Whether the array contains `item` (false for a NULL array).",
        (2,),
    ),
    _f(
        "Split",
        "scalar",
        "Split(text STRING, delimiter_regex STRING) -> ARRAY<STRING>",
        "Splits on a regular expression, dropping trailing empty strings (Java's String.split).",
        (2,),
    ),
    _f(
        "ArrayAggregate",
        "scalar",
        "ArrayAggregate(array, 'operation', 'type') -> value",
        "average/min/max/sum/count/findFirst/findAny of an array, after optional distinct./sort. prefixes.",
        (3,),
    ),
    _f(
        "ArrayOperate",
        "scalar",
        "ArrayOperate(array, 'operation', 'type') -> ARRAY",
        "distinct and/or sorted (chained with dots) copy of an array, NULL elements left out.",
        (3,),
    ),
    _f(
        "ByteToString",
        "scalar",
        "ByteToString(bytes BINARY) -> STRING",
        "The bytes decoded as UTF-8 (invalid sequences become U+FFFD).",
        (1,),
    ),
    # time
    _f(
        "StartOfWeek",
        "scalar",
        "StartOfWeek(epoch_seconds_or_millis BIGINT, time_zone STRING) -> BIGINT",
        "Monday 00:00:00 of the week, in the zone, in the argument's unit (milliseconds from 1e11 up).",
        (2,),
    ),
    _f(
        "EndOfWeek",
        "scalar",
        "EndOfWeek(epoch_seconds_or_millis BIGINT, time_zone STRING) -> BIGINT",
        "Sunday 23:59:59 (.999 for milliseconds) of the week, in the zone, in the argument's unit.",
        (2,),
    ),
    _f(
        "StartOfMonth",
        "scalar",
        "StartOfMonth(epoch_seconds BIGINT, time_zone STRING) -> BIGINT",
        "Epoch seconds of the first day of the month 00:00:00, in the zone.",
        (2,),
    ),
    _f(
        "EndOfMonth",
        "scalar",
        "EndOfMonth(epoch_seconds BIGINT, time_zone STRING) -> BIGINT",
        "Epoch seconds of the last day of the month 23:59:59, in the zone.",
        (2,),
    ),
    _f(
        "TimeInDate",
        "scalar",
        "TimeInDate(epoch_seconds BIGINT, hour INT, minute INT[, time_zone STRING]) -> BIGINT",
        "Epoch seconds of hour:minute:00 on the same day (default zone UTC).",
        (3, 4),
    ),
    _f(
        "TimestampFromUnix",
        "scalar",
        "TimestampFromUnix(epoch_seconds BIGINT) -> TIMESTAMP",
        "The timestamp of epoch seconds.",
        (1,),
    ),
    _f(
        "FormatTimeInZone",
        "scalar",
        "FormatTimeInZone(ts TIMESTAMP, time_zone STRING, pattern STRING) -> STRING",
        "The timestamp formatted with a datetime pattern in the zone.",
        (3,),
    ),
    # json
    _f(
        "JsonQuery",
        "scalar",
        "JsonQuery(json STRING, path STRING) -> STRING",
        "The value at a JSONPath: objects and arrays as JSON text, scalars as text.",
        (2,),
    ),
    _f(
        "JsonUpdate",
        "scalar",
        "JsonUpdate(json STRING, path STRING, value) -> STRING",
        "The JSON with the value at a JSONPath set (added when the key is new).",
        (3,),
        "udf",
    ),
    _f(
        "JsonDelete",
        "scalar",
        "JsonDelete(json STRING, path STRING) -> STRING",
        "The JSON with the node at a JSONPath removed.",
        (2,),
        "udf",
    ),
    # time series
    _f(
        "LinearTrend",
        "scalar",
        "LinearTrend(timestamps ARRAY<TIMESTAMP>, values ARRAY<DOUBLE>, hop_start TIMESTAMP, window_minutes INT) -> DOUBLE",
        "Slope per minute of the least-squares line through per-minute values (missing minutes count 0).",
        (4,),
        "udf",
    ),
    _f(
        "ExponentialMovingAverage",
        "scalar",
        "ExponentialMovingAverage(timestamps ARRAY<TIMESTAMP>, values ARRAY<DOUBLE>, hop_start TIMESTAMP, "
        "window_minutes DOUBLE, alpha DOUBLE) -> DOUBLE",
        "Exponential moving average of per-minute values, the newest minute weighted most.",
        (5,),
        "udf",
    ),
    # aggregates
    _f(
        "DistinctCount",
        "aggregate",
        "DistinctCount(x) -> INT",
        "The number of distinct non-NULL values of x in the group.",
        (1,),
    ),
    _f(
        "CollectArray",
        "aggregate",
        "CollectArray([DISTINCT] x) -> ARRAY",
        "The non-NULL values of x in the group as an array (DISTINCT: each once).",
        (1,),
    ),
    _f(
        "PercentileAggregator",
        "aggregate",
        "PercentileAggregator(percentile DOUBLE, x DOUBLE) -> DOUBLE",
        "The percentile (0-100) of x in the group, estimated as Apache Commons Math does.",
        (2,),
    ),
    # look-ups in key-value collections of a store (the original's GCS "darts")
    _f(
        "DartGet",
        "scalar",
        "DartGet(collection STRING, key STRING, refresh_hours DOUBLE[, default STRING]) -> STRING",
        "The value of `key` in a dart-get collection (NULL, or `default`, when missing), re-read after "
        "`refresh_hours`.",
        (3, 4),
        "udf",
    ),
    _f(
        "DartContains",
        "scalar",
        "DartContains(collection STRING, value STRING[, regex STRING][, refresh_hours DOUBLE]) -> BOOLEAN",
        "Whether `value` is in a dart-contains collection (or matches `regex` with an item in place of %s).",
        (2, 3, 4),
        "udf",
    ),
    # predicates and projections over lists of serialized messages (the original's LongbowPlus)
    _f(
        "CondEq",
        "scalar",
        "CondEq(field STRING, value) -> PREDICATE",
        "An equality predicate on a message field (dotted path) for Filters.",
        (2,),
    ),
    _f(
        "Filters",
        "scalar",
        "Filters(messages ARRAY<BINARY>, class STRING[, CondEq(...), ...]) -> ARRAY<BINARY>",
        "The messages of the list (of that protobuf class) for which every CondEq holds.",
        tuple(range(2, 66)),
    ),
    _f(
        "SelectFields",
        "scalar",
        "SelectFields(messages ARRAY<BINARY>, class STRING, path STRING) | SelectFields(Filters(...), path) "
        "-> ARRAY<STRING>",
        "The value at a field path of each message of the list, as text.",
        (2, 3),
    ),
    # feature rows (the original's Feast functions)
    _f(
        "Features",
        "aggregate",
        "Features(key1, value1[, key2, value2, ...]) -> ARRAY<FEATURE_ROW>",
        "The feature rows (key, value by the value's SQL type, name) of every pair of every event in the group.",
        tuple(range(2, 2 * 128 + 1, 2)),
    ),
    _f(
        "FeaturesWithType",
        "aggregate",
        "FeaturesWithType(key1, value1, 'Type1'[, key2, value2, 'Type2', ...]) -> ARRAY<FEATURE_ROW>",
        "The distinct feature rows of every (key, value, type) triplet of every event in the group.",
        tuple(range(3, 3 * 128 + 1, 3)),
    ),
    _f(
        "SingleFeatureWithType",
        "scalar",
        "SingleFeatureWithType(key1, value1, 'Type1'[, ...]) -> ARRAY<FEATURE_ROW>",
        "The distinct feature rows of one event's (key, value, type) triplets.",
        tuple(range(3, 3 * 128 + 1, 3)),
    ),
    # table functions
    _f(
        "HistogramBucket",
        "table",
        "LATERAL TABLE(HistogramBucket(x DOUBLE, 'b1,b2,...')) AS T(bucket)",
        "One row per cumulative histogram bucket that x falls in, always including '+Inf'.",
        (2,),
        columns=("bucket",),
    ),
    _f(
        "OutlierMad",
        "table",
        "LATERAL TABLE(OutlierMad(values, timestamps, window_start, window_minutes, observation_minutes, "
        "tolerance, outlier_percentage)) AS T(timestamp, value, upper_bound, lower_bound, is_outlier)",
        "The observed points of a series with median ± tolerance·MAD bounds, and whether the window is an "
        "outlier.",
        (7,),
        "udf",
        columns=("timestamp", "value", "upper_bound", "lower_bound", "is_outlier"),
    ),
]

DAGGER_FUNCTIONS: dict[str, DaggerFunction] = {f.name.lower(): f for f in _LIBRARY}


#: Spark built-ins a query may not call: they reach outside the query's rows, into the JVM (reflect runs any
#: static Java method, so also any code), files (a protobuf descriptor or an XML entity read from a path),
#: or who and where the process runs. A query runs in a shared Spark application and in the server's
#: preview, beside other teams' daggers.
DENIED_SPARK_FUNCTIONS = frozenset(
    {
        "reflect",
        "java_method",
        "try_reflect",
        "from_protobuf",
        "to_protobuf",
        "from_avro",
        "to_avro",
        "schema_of_avro",
        "xpath",
        "xpath_boolean",
        "xpath_double",
        "xpath_float",
        "xpath_int",
        "xpath_long",
        "xpath_number",
        "xpath_short",
        "xpath_string",
        "input_file_name",
        "input_file_block_length",
        "input_file_block_start",
        "current_user",
        "session_user",
        "user",
        "current_catalog",
        "current_database",
        "current_schema",
        "current_path",
        "version",
        "python_worker_logs",
        "sql_keywords",
    }
)


#: Flink built-ins that Spark has no function for, which :mod:`job.sql.values` rewrites into Spark's.
FLINK_FUNCTIONS = frozenset(
    {
        "split_index",
        "sha224",
        "sha256",
        "sha384",
        "sha512",
        "is_digit",
        "is_alpha",
        # refused with what to write instead (job.sql.flink_builtins)
        "proctime",
        "json_value",
        "json_query",
        "json_exists",
    }
)


@cache
def spark_functions() -> frozenset[str]:
    """Return the lower-cased names of the Spark built-in functions a query may call (``SHOW FUNCTIONS``
    of the pinned Spark, less :data:`DENIED_SPARK_FUNCTIONS`)."""
    text = resources.files("job.sql").joinpath("spark_functions.txt").read_text()
    return (
        frozenset(line.strip().lower() for line in text.splitlines() if line.strip()) - DENIED_SPARK_FUNCTIONS
    )


def lookup(name: str, user: Mapping[str, DaggerFunction] | None = None) -> DaggerFunction | None:
    """Return the Dagger (or the dagger's own, ``user``) function called ``name``, or None."""
    low = name.lower()
    found = DAGGER_FUNCTIONS.get(low)
    if found is None and user:
        found = user.get(low)
    return found


def is_known(name: str, user: Mapping[str, DaggerFunction] | None = None) -> bool:
    """Return whether ``name`` is a Spark built-in, a Dagger function or one of ``user`` (case-insensitive)."""
    low = name.lower()
    return lookup(name, user) is not None or low in spark_functions() or low in FLINK_FUNCTIONS


def dagger_kind(name: str, user: Mapping[str, DaggerFunction] | None = None) -> str | None:
    """Return the kind of a Dagger (or user) function, or None for anything else."""
    fn = lookup(name, user)
    return fn.kind if fn else None
