"""Flink's built-in functions and operators, one expression a case, drawn from Flink's own documentation
(``docs/data/sql_functions.yml`` of apache/flink: arithmetic, string, temporal, conditional, conversion and
aggregate functions, with the examples it gives) and the constructs its planner tests exercise.

Each :class:`Probe` is one expression; the probes of a :class:`Group` are the columns of one query over the
harness's events (``SELECT <keys>, <probe> AS <probe's column>, ... FROM <table> [GROUP BY ...]``), so a
group runs as one Flink job and one dagger, and each probe is compared (its column's values, row by row
with the keys, and its type) and counted as its own case. A probe whose value differs on purpose carries
Daggers' rows and the reason; :data:`FUNCTION_REFUSALS` are Flink expressions that ``daggers sql check``
refuses, at their line and column, with what to write instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.flink_compat.cases import Case, Refusal


@dataclass(frozen=True)
class Probe:
    """One expression compared on both engines. ``flink``: Flink's spelling where it differs on purpose;
    ``daggers``: Daggers' rows (the group's keys, then this value) where the values differ on purpose."""

    id: str
    sql: str
    flink: str | None = None
    differs: str = ""
    daggers: tuple[tuple[Any, ...], ...] | None = None

    @property
    def column(self) -> str:
        """The probe's output column."""
        return "f_" + self.id.replace("-", "_")


@dataclass(frozen=True)
class Group:
    """Probes run as the columns of one query: ``SELECT <keys>, <probes> FROM <source>``."""

    id: str
    what: str
    keys: tuple[str, ...]
    source: str
    probes: tuple[Probe, ...]

    def query(self, flink: bool) -> str:
        items = [*self.keys]
        for p in self.probes:
            items.append(f"{p.flink if flink and p.flink else p.sql} AS {p.column}")
        return "SELECT " + ",\n  ".join(items) + f"\nFROM {self.source}"

    @property
    def key_count(self) -> int:
        return len(self.keys)


P = Probe
_WINDOW_END = "2026-03-02 10:05:00.000000"
_STRICT_MATH = (
    "Spark computes EXP with Java's StrictMath, Flink with Math: the last digit can differ "
    "(2.7182818284590455 against 2.718281828459045 for EXP(1))"
)
_VARIANCE = (
    "Spark's VAR_*/STDDEV_* of a DOUBLE use another algorithm than Flink's: the last digits can differ "
    "(0.0005555555555555467 against 0.0005555555555555418)"
)
#: the city of each booking of the main data set (o1..o7), for Daggers' rows of a probe of the city
_CITIES = {"o1": 1, "o2": 2, "o3": 1, "o4": 1, "o5": 2, "o6": 1, "o7": 2}


def _by_city(*values: tuple[int, Any]) -> tuple[tuple[Any, ...], ...]:
    """Daggers' rows (order_number, value) of a probe whose value depends only on the booking's city."""
    of = dict(values)
    return tuple((order, of[city]) for order, city in _CITIES.items())


def _by_vehicle(bike: Any, car: Any) -> tuple[tuple[Any, ...], ...]:
    """Daggers' rows (vehicle_type, window_end, value) of an aggregate probe."""
    return (("BIKE", _WINDOW_END, bike), ("CAR", _WINDOW_END, car))


_TO_DATE_LENIENT = (
    "Flink's TO_DATE(s, format) parses leniently (java.text.SimpleDateFormat): text that does not match "
    "gives a date all the same ('COMPLETED' with 'dd/MM/yyyy' is 5471-09-27, '32/01/2026' is "
    "2026-02-01); Daggers gives NULL, as for any text that does not parse"
)
_BOOKINGS = ("order_number",)
_PINGS = ("driver_id", "event_timestamp")
_AGG_KEYS = ("vehicle_type", "TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end")
_AGG_SOURCE = "bookings\nGROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), vehicle_type"

GROUPS: list[Group] = [
    Group(
        "fn-arithmetic",
        "arithmetic operators and integer division",
        _BOOKINGS,
        "bookings",
        (
            P("add-int-bigint", "city_id + fare_idr"),
            P("sub-int-literal", "city_id - 5"),
            P("mul-int-literal", "city_id * 3"),
            P("mul-bigint-int", "fare_idr * city_id"),
            P("div-int-int", "(city_id + 5) / 3"),
            P("div-bigint-literal", "fare_idr / 7"),
            P("div-negative-truncates", "(0 - fare_idr) / 3000"),
            P("div-double-int", "pickup_lat / 2"),
            P("div-int-decimal-literal", "city_id / 2.0"),
            P("div-bigint-double", "fare_idr / 1e3"),
            P("mod-operator-negative", "(city_id - 5) % 3"),
            P("mod-function", "MOD(fare_idr, 7000)"),
            P("mod-function-negative", "MOD(0 - fare_idr, 7)"),
            P("unary-minus", "-fare_idr"),
            P("unary-plus", "+city_id"),
            P("decimal-literal-arithmetic", "0.1 + 0.2 * city_id"),
            P("int-times-double", "city_id * pickup_long"),
            P("precedence", "city_id + fare_idr / 1000 * 2 - 1"),
        ),
    ),
    Group(
        "fn-numeric",
        "numeric functions",
        _BOOKINGS,
        "bookings",
        (
            P("abs-int", "ABS(city_id - 2)"),
            P("abs-double", "ABS(pickup_lat)"),
            P("power-int", "POWER(city_id, 2)"),
            P("power-double", "POWER(pickup_lat, 2)"),
            P("sqrt", "SQRT(fare_idr)"),
            P("ln", "LN(fare_idr + 1)"),
            P("log10", "LOG10(fare_idr + 1)"),
            P("log2", "LOG2(fare_idr + 1)"),
            P("log-base", "LOG(2, fare_idr + 1)"),
            P("log-natural", "LOG(fare_idr + 1)"),
            P(
                "exp-int",
                "EXP(city_id)",
                differs=_STRICT_MATH,
                daggers=_by_city((1, 2.7182818284590455), (2, 7.38905609893065)),
            ),
            P("round-double", "ROUND(pickup_lat, 1)"),
            P("round-double-half", "ROUND(pickup_long, 1)"),
            P("round-bigint-negative", "ROUND(fare_idr, -4)"),
            P("round-decimal", "ROUND(CAST(fare_idr AS DECIMAL(12, 2)) / 7, 2)"),
            P("floor-int", "FLOOR(city_id)"),
            P("ceil-int", "CEIL(city_id)"),
            P("ceil-double", "CEIL(pickup_lat)"),
            P("ceiling-double", "CEILING(pickup_long)"),
            P("floor-decimal", "FLOOR(CAST(pickup_lat AS DECIMAL(10, 3)))"),
            P("floor-double-times-decimal", "FLOOR(pickup_lat * 0.5)"),
            P("ceil-decimal-over-double", "CEIL(0.125 / pickup_long + 0.5)"),
            P("grid-key", "CAST(FLOOR(pickup_lat * 100) AS BIGINT)"),
            P("grid-key-decimal", "CAST(FLOOR(pickup_long / 0.01) AS BIGINT)"),
            P("sign-double", "SIGN(pickup_lat)"),
            P("sign-bigint", "SIGN(fare_idr - 15000)"),
            P("sin", "SIN(pickup_lat)"),
            P("cos", "COS(pickup_lat)"),
            P("tan", "TAN(pickup_lat)"),
            P("cot", "COT(pickup_lat)"),
            P("asin", "ASIN(pickup_lat / 10)"),
            P("acos", "ACOS(pickup_lat / 10)"),
            P("atan", "ATAN(pickup_lat)"),
            P("atan2", "ATAN2(pickup_lat, pickup_long)"),
            P("sinh", "SINH(pickup_lat)"),
            P("cosh", "COSH(pickup_lat)"),
            P("tanh", "TANH(pickup_lat)"),
            P("degrees", "DEGREES(pickup_lat)"),
            P("radians", "RADIANS(pickup_long)"),
            P("pi", "PI() * city_id"),
            P("e", "E() * city_id"),
            P("truncate-double-2", "TRUNCATE(pickup_long, 2)"),
            P("bin", "BIN(city_id + 10)"),
            P("hex-bigint", "HEX(fare_idr)"),
            P("hex-string", "HEX(order_number)"),
        ),
    ),
    Group(
        "fn-strings",
        "string functions",
        _BOOKINGS,
        "bookings",
        (
            P("concat-operator", "order_number || '-' || status"),
            P("concat-null", "CONCAT(order_number, CAST(NULL AS VARCHAR))"),
            P(
                "concat-ws-skips-null",
                "CONCAT_WS('~', order_number, CAST(NULL AS VARCHAR), status, '', vehicle_type)",
            ),
            P("char-length", "CHAR_LENGTH(status)"),
            P("character-length", "CHARACTER_LENGTH(vehicle_type)"),
            P("upper", "UPPER(order_number)"),
            P("lower", "LOWER(status)"),
            P("position-found", "POSITION('_' IN status)"),
            P("position-missing", "POSITION('X' IN status)"),
            P("trim-both-default", "TRIM(CONCAT('  ', status, ' '))"),
            P("trim-leading", "TRIM(LEADING 'C' FROM status)"),
            P("trim-trailing", "TRIM(TRAILING 'D' FROM status)"),
            P("ltrim", "LTRIM(CONCAT('  ', vehicle_type))"),
            P("rtrim", "RTRIM(CONCAT(vehicle_type, '  '))"),
            P("repeat", "REPEAT(order_number, 2)"),
            P("regexp-replace", "REGEXP_REPLACE(status, '[AEIOU]', '')"),
            P("overlay", "OVERLAY(status PLACING 'xx' FROM 2 FOR 3)"),
            P("overlay-no-for", "OVERLAY(status PLACING 'xx' FROM 2)"),
            P("substring-from", "SUBSTRING(status FROM 3)"),
            P("substring-comma", "SUBSTRING(status, 2, 3)"),
            P("substr", "SUBSTR(status, 4)"),
            P("replace", "REPLACE(status, 'ED', '')"),
            P("regexp-extract-group", "REGEXP_EXTRACT(status, '([A-Z]+)_([A-Z]+)', 2)"),
            P("regexp-extract-no-match-null", "REGEXP_EXTRACT(status, 'X(Y)', 1)"),
            P("regexp-extract-whole", "REGEXP_EXTRACT(order_number, '[0-9]+', 0)"),
            P("regexp-extract-default-index", "REGEXP_EXTRACT(status, '(C)(O|A)')"),
            P("initcap", "INITCAP(REPLACE(status, '_', ' '))"),
            P("initcap-underscore", "INITCAP(status)"),
            P("initcap-digits-spaces", "INITCAP(CONCAT(LOWER(status), ' 2ND-go x'))"),
            P("lpad", "LPAD(order_number, 5, '0')"),
            P("lpad-shortens", "LPAD(status, 3, 'x')"),
            P("rpad", "RPAD(order_number, 5, 'ab')"),
            P("ascii", "ASCII(status)"),
            P("chr", "CHR(city_id + 64)"),
            P("instr", "INSTR(status, 'E')"),
            P("left", "LEFT(status, 3)"),
            P("right", "RIGHT(status, 3)"),
            P("locate", "LOCATE('E', status)"),
            P("locate-from", "LOCATE('E', status, 3)"),
            P("reverse", "REVERSE(order_number)"),
            P("regexp-matches", "REGEXP(status, '^C.*D$')"),
            P("like", "status LIKE 'C%'"),
            P("like-underscore", "status LIKE '_AN%'"),
            P("not-like", "status NOT LIKE '%ED'"),
            P("md5", "MD5(order_number)"),
            P("sha1", "SHA1(order_number)"),
            P("sha256", "SHA256(order_number)"),
            P("sha2", "SHA2(order_number, 512)"),
            P("to-base64", "TO_BASE64(order_number)"),
            P("from-base64", "FROM_BASE64('aGVsbG8gd29ybGQ=')"),
            P("parse-url-host", "PARSE_URL(CONCAT('http://example.com/p?k=', order_number, '#r'), 'HOST')"),
            P(
                "parse-url-query-key",
                "PARSE_URL(CONCAT('http://example.com/p?k=', order_number, '&j=2'), 'QUERY', 'k')",
            ),
            P("split-index-comma", "SPLIT_INDEX(CONCAT(order_number, ',', status), ',', 1)"),
            P("is-digit", "IS_DIGIT(SUBSTRING(order_number FROM 2))"),
            P("is-alpha", "IS_ALPHA(vehicle_type)"),
        ),
    ),
    Group(
        "fn-temporal",
        "temporal functions",
        _BOOKINGS,
        "bookings",
        (
            P("extract-year", "EXTRACT(YEAR FROM rowtime)"),
            P("extract-month", "EXTRACT(MONTH FROM rowtime)"),
            P("extract-day", "EXTRACT(DAY FROM rowtime)"),
            P("extract-hour", "EXTRACT(HOUR FROM rowtime)"),
            P("extract-quarter", "EXTRACT(QUARTER FROM rowtime)"),
            P("extract-week", "EXTRACT(WEEK FROM rowtime)"),
            P("extract-microsecond", "EXTRACT(MICROSECOND FROM rowtime)"),
            P("year", "YEAR(rowtime)"),
            P("quarter", "QUARTER(rowtime)"),
            P("month", "MONTH(rowtime)"),
            P("dayofmonth", "DAYOFMONTH(rowtime)"),
            P("dayofweek", "DAYOFWEEK(rowtime)"),
            P("dayofyear", "DAYOFYEAR(rowtime)"),
            P("minute", "MINUTE(rowtime)"),
            P("second", "SECOND(rowtime)"),
            P("date-format-minute", "DATE_FORMAT(rowtime, 'yyyy-MM-dd HH:mm')"),
            P("date-format-millis", "DATE_FORMAT(rowtime, 'HH:mm:ss.SSS')"),
            P("date-format-compact", "DATE_FORMAT(event_timestamp, 'yyyyMMdd')"),
            P("timestampadd-minute", "TIMESTAMPADD(MINUTE, 5, rowtime)"),
            P("timestampadd-second-negative", "TIMESTAMPADD(SECOND, -30, rowtime)"),
            P("timestampadd-day", "TIMESTAMPADD(DAY, 1, rowtime)"),
            P("timestampdiff-second", "TIMESTAMPDIFF(SECOND, TIMESTAMP '2026-03-02 10:00:00', rowtime)"),
            P("timestampdiff-hour-negative", "TIMESTAMPDIFF(HOUR, rowtime, TIMESTAMP '2026-03-01 00:00:00')"),
            P("timestampdiff-day", "TIMESTAMPDIFF(DAY, TIMESTAMP '2026-02-01 12:00:00', rowtime)"),
            P("floor-to-minute", "FLOOR(rowtime TO MINUTE)"),
            P("ceil-to-minute", "CEIL(rowtime TO MINUTE)"),
            P("floor-to-hour", "FLOOR(rowtime TO HOUR)"),
            P("floor-to-day", "FLOOR(rowtime TO DAY)"),
            P("plus-interval", "rowtime + INTERVAL '1' HOUR"),
            P("minus-interval", "rowtime - INTERVAL '30' SECOND"),
            P("timestamp-literal", "TIMESTAMP '2026-03-02 10:00:00'"),
            P("timestamp-compare", "rowtime >= TIMESTAMP '2026-03-02 10:01:00'"),
            P("to-timestamp", "TO_TIMESTAMP('2026-03-02 10:00:00')"),
            P(
                "to-timestamp-column",
                "TO_TIMESTAMP(CONCAT('2026-03-02 10:0', CAST(city_id AS VARCHAR), ':00'))",
            ),
            P(
                "to-timestamp-format",
                "TO_TIMESTAMP(CONCAT('02/03/2026 1', CAST(city_id AS VARCHAR)), 'dd/MM/yyyy HH')",
            ),
            P(
                "to-timestamp-ltz-millis",
                "CAST(TO_TIMESTAMP_LTZ(1772445600000 + city_id, 3) AS TIMESTAMP(3))",
            ),
            P("to-timestamp-ltz-seconds", "CAST(TO_TIMESTAMP_LTZ(1772445600 + city_id, 0) AS TIMESTAMP(3))"),
            P("unix-timestamp-format", "UNIX_TIMESTAMP(DATE_FORMAT(rowtime, 'yyyy-MM-dd HH:mm:ss'))"),
            P("unix-timestamp-bad", "UNIX_TIMESTAMP(order_number, 'yyyy-MM-dd')"),
            P("from-unixtime", "FROM_UNIXTIME(1772445600 + city_id)"),
            P("from-unixtime-format", "FROM_UNIXTIME(1772445600 + city_id, 'HH:mm:ss')"),
        ),
    ),
    Group(
        "fn-conditional",
        "conditional functions and predicates",
        _BOOKINGS,
        "bookings",
        (
            P("case-no-else", "CASE WHEN fare_idr > 20000 THEN 'high' END"),
            P("case-simple-int", "CASE city_id WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'other' END"),
            P("case-numeric-branches", "CASE WHEN city_id = 1 THEN fare_idr ELSE city_id END"),
            P("coalesce-string", "COALESCE(NULLIF(status, 'COMPLETED'), 'done')"),
            P("coalesce-int-bigint", "COALESCE(NULLIF(fare_idr, 0), city_id)"),
            P("nullif", "NULLIF(city_id, 1)"),
            P("if-string", "IF(fare_idr > 15000, 'high', 'low')"),
            P("if-null-branch", "IF(city_id = 1, fare_idr, CAST(NULL AS BIGINT))"),
            P("ifnull", "IFNULL(NULLIF(fare_idr, 0), -1)"),
            P("greatest-strings", "GREATEST(order_number, customer_id)"),
            P("least-int", "LEAST(city_id, 2, 3)"),
            P("greatest-double", "GREATEST(pickup_lat, -6.22)"),
            P("is-distinct-from-null", "NULLIF(city_id, 1) IS DISTINCT FROM 2"),
            P("is-not-distinct-from", "NULLIF(city_id, 1) IS NOT DISTINCT FROM NULLIF(city_id, 1)"),
            P("between", "fare_idr BETWEEN 12000 AND 25000"),
            P("not-between", "fare_idr NOT BETWEEN 12000 AND 25000"),
            P("in-with-null", "NULLIF(city_id, 2) IN (1, 3)"),
            P("not-in-list", "status NOT IN ('COMPLETED', 'CANCELLED')"),
            P("is-null", "NULLIF(fare_idr, 0) IS NULL"),
            P("is-not-null", "NULLIF(fare_idr, 0) IS NOT NULL"),
            P("is-true", "(fare_idr > 15000) IS TRUE"),
            P("is-not-false", "(NULLIF(fare_idr, 0) > 15000) IS NOT FALSE"),
            P("and-null", "(NULLIF(fare_idr, 0) > 15000) AND city_id = 1"),
            P("or-null", "(NULLIF(fare_idr, 0) > 15000) OR city_id = 1"),
            P("not-operator", "NOT (city_id = 1)"),
        ),
    ),
    Group(
        "fn-casts",
        "CAST between types",
        _BOOKINGS,
        "bookings",
        (
            P("cast-int-to-bigint", "CAST(city_id AS BIGINT)"),
            P("cast-bigint-to-int", "CAST(fare_idr AS INT)"),
            P("cast-double-to-int", "CAST(pickup_lat AS INT)"),
            P("cast-double-to-bigint", "CAST(pickup_long * 1000 AS BIGINT)"),
            P("cast-double-to-decimal", "CAST(pickup_long AS DECIMAL(10, 1))"),
            P("cast-bigint-to-decimal", "CAST(fare_idr AS DECIMAL(12, 2))"),
            P("cast-int-to-double", "CAST(city_id AS DOUBLE)"),
            P("cast-double-to-float", "CAST(pickup_lat AS FLOAT)"),
            P("cast-string-to-int", "CAST(CONCAT(CAST(city_id AS VARCHAR), '5') AS INT)"),
            P("cast-string-to-double", "CAST(CONCAT(CAST(city_id AS VARCHAR), '.5') AS DOUBLE)"),
            P("cast-string-to-decimal", "CAST(CONCAT(CAST(city_id AS VARCHAR), '.255') AS DECIMAL(5, 2))"),
            P("cast-int-to-string", "CAST(city_id AS VARCHAR)"),
            P("cast-bigint-to-string", "CAST(fare_idr AS STRING)"),
            P("cast-double-to-string", "CAST(pickup_lat AS VARCHAR)"),
            P("cast-large-double-to-string", "CAST(pickup_long * 10000000 AS VARCHAR)"),
            P("cast-decimal-to-string", "CAST(CAST(fare_idr AS DECIMAL(12, 2)) AS VARCHAR)"),
            P("cast-float-to-string", "CAST(CAST(pickup_lat AS FLOAT) AS VARCHAR)"),
            P("cast-date-to-string", "CAST(CAST(rowtime AS DATE) AS VARCHAR)"),
            P("cast-timestamp-to-date", "CAST(rowtime AS DATE)"),
            P("cast-string-to-timestamp", "CAST('2026-03-02 10:00:00' AS TIMESTAMP(3))"),
            P("cast-string-to-date", "CAST('2026-03-02' AS DATE)"),
            P("cast-string-to-boolean", "CAST(LOWER(CAST(city_id = 1 AS VARCHAR)) AS BOOLEAN)"),
            P("cast-int-to-boolean", "CAST(city_id - 1 AS BOOLEAN)"),
            P("cast-boolean-to-int", "CAST(city_id = 1 AS INT)"),
            P("cast-null-to-int", "CAST(NULL AS INT)"),
            P("try-cast-invalid", "TRY_CAST(IF(city_id = 1, '7', status) AS INT)"),
        ),
    ),
    Group(
        "fn-floats",
        "FLOAT columns in arithmetic, functions and casts",
        _PINGS,
        "pings",
        (
            P("float-plus-int", "speed_kmh + 1"),
            P("float-minus-float", "speed_kmh - accuracy_m"),
            P("float-times-double", "speed_kmh * lat"),
            P("float-abs", "ABS(accuracy_m - 10)"),
            P("float-round", "ROUND(speed_kmh / 3, 2)"),
            P("float-to-double", "CAST(speed_kmh AS DOUBLE) / 3"),
            P("float-power", "POWER(speed_kmh, 2)"),
            P("float-sqrt", "SQRT(accuracy_m)"),
            P("float-sign", "SIGN(accuracy_m - 10)"),
            P("float-to-int", "CAST(speed_kmh / 3 AS INT)"),
        ),
    ),
    Group(
        "fn-aggregates",
        "aggregate functions in a window",
        _AGG_KEYS,
        _AGG_SOURCE,
        (
            P("count-star", "COUNT(*)"),
            P("count-one", "COUNT(1)"),
            P("count-column-nulls", "COUNT(NULLIF(fare_idr, 0))"),
            P("sum-bigint", "SUM(fare_idr)"),
            P("sum-int", "SUM(city_id)"),
            P("sum-double", "SUM(pickup_lat)"),
            P("sum-decimal", "SUM(CAST(fare_idr AS DECIMAL(12, 2)))"),
            P("sum-nulls", "SUM(NULLIF(fare_idr, 0))"),
            P("avg-double", "AVG(pickup_lat)"),
            P("avg-decimal", "AVG(CAST(fare_idr AS DECIMAL(12, 2)))"),
            P("avg-bigint-nulls", "AVG(NULLIF(fare_idr, 0))"),
            P("min-string", "MIN(order_number)"),
            P("max-string", "MAX(status)"),
            P("min-timestamp", "MIN(event_timestamp)"),
            P("max-double", "MAX(pickup_long)"),
            P("max-int", "MAX(city_id)"),
            P(
                "stddev-pop-double",
                "STDDEV_POP(pickup_lat)",
                differs=_VARIANCE,
                daggers=_by_vehicle(0.023570226039551397, 0.04330127018922178),
            ),
            P(
                "stddev-samp-double",
                "STDDEV_SAMP(pickup_lat)",
                differs=_VARIANCE,
                daggers=_by_vehicle(0.028867513459481058, 0.04999999999999982),
            ),
            P(
                "var-pop-double",
                "VAR_POP(pickup_lat)",
                differs=_VARIANCE,
                daggers=_by_vehicle(0.0005555555555555467, 0.0018749999999999867),
            ),
            P(
                "var-samp-double",
                "VAR_SAMP(pickup_lat)",
                differs=_VARIANCE,
                daggers=_by_vehicle(0.00083333333333332, 0.0024999999999999823),
            ),
            P(
                "variance-double",
                "VARIANCE(pickup_long)",
                differs=_VARIANCE,
                daggers=_by_vehicle(0.0008333333333331202, 0.0025000000000004264),
            ),
            P("stddev-pop-bigint", "STDDEV_POP(fare_idr)"),
            P("var-samp-bigint", "VAR_SAMP(fare_idr)"),
            P("count-filter", "COUNT(*) FILTER (WHERE status = 'COMPLETED')"),
            P("sum-filter", "SUM(fare_idr) FILTER (WHERE city_id = 1)"),
            P("avg-int-filter", "AVG(fare_idr) FILTER (WHERE city_id = 1)"),
            P("max-filter-empty-null", "MAX(fare_idr) FILTER (WHERE city_id = 3)"),
            P("sum-expression", "SUM(fare_idr * city_id)"),
            P("avg-of-ratio", "AVG(CAST(fare_idr AS DOUBLE) / 1000)"),
            P("aggregate-arithmetic", "SUM(fare_idr) / COUNT(*)"),
            P("sum-case", "SUM(CASE WHEN status = 'COMPLETED' THEN 1 ELSE 0 END)"),
        ),
    ),
]


GROUPS += [
    Group(
        "fn-edges",
        "values at the edges: overflowing casts, division by zero, out-of-range arguments, Flink's "
        "own readings",
        _BOOKINGS,
        "bookings",
        (
            P("between-symmetric", "fare_idr BETWEEN SYMMETRIC 25000 AND 12000"),
            P("not-between-symmetric", "fare_idr NOT BETWEEN SYMMETRIC 25000 AND 12000"),
            P("between-asymmetric-reversed", "fare_idr BETWEEN ASYMMETRIC 25000 AND 12000"),
            P("chr-353", "CHR(353)"),
            P("chr-over-255", "CHR(city_id + 255)"),
            P("chr-negative", "CHR(city_id - 3)"),
            P("substring-zero-start", "SUBSTRING(status, 0, 3)"),
            P("substring-negative-start", "SUBSTRING(status, -3)"),
            P("substring-negative-start-length", "SUBSTRING(status, -3, 2)"),
            P("substring-past-end", "SUBSTRING(status, 2, 100)"),
            P("substring-start-past-end", "SUBSTRING(status, 20)"),
            P("substring-far-negative", "SUBSTRING(status, -20, 3)"),
            P("substring-negative-length-null", "SUBSTRING(status, 2, city_id - 3)"),
            P("substring-negative-literal-null", "SUBSTRING(status, 2, -1)"),
            P("locate-start-zero", "LOCATE('E', status, 0)"),
            P("locate-start-negative", "LOCATE('E', status, city_id - 5)"),
            P("locate-start-null", "LOCATE('E', status, CAST(NULL AS INT))"),
            P("locate-start-past-end", "LOCATE('E', status, 40)"),
            P("locate-empty", "LOCATE('', status, 3)"),
            P("instr-missing", "INSTR(status, 'Z')"),
            P("regexp-extract-optional-group-null", "REGEXP_EXTRACT(status, '(X)?(C)', 1)"),
            P("regexp-extract-alternation", "REGEXP_EXTRACT(status, '(CAN)|(COM)', 2)"),
            P("regexp-extract-empty-group", "REGEXP_EXTRACT(status, 'C(X*)', 1)"),
            P("str-to-map-get", "STR_TO_MAP(CONCAT('k=', order_number, ',j=2'))['k']"),
            P("str-to-map-separators", "STR_TO_MAP(CONCAT('k:', order_number, ';j:2'), ';', ':')['j']"),
            P("str-to-map-repeated-key", "STR_TO_MAP(CONCAT('a=1,a=', order_number))['a']"),
            P("str-to-map-size", "CARDINALITY(STR_TO_MAP(CONCAT(order_number, '=1,,b=2,')))"),
            P("str-to-map-empty-text", "CARDINALITY(STR_TO_MAP(SUBSTRING(status, 1, 0)))"),
            P("str-to-map-two-separators", "STR_TO_MAP(CONCAT('a=', order_number, '=2'))['a']"),
            P("str-to-map-no-value-null", "STR_TO_MAP('a,b=1')['a']"),
            P("to-date", "TO_DATE(CONCAT('2026-03-0', CAST(city_id AS VARCHAR)))"),
            P("to-date-short", "TO_DATE(CONCAT('2026-3-', CAST(city_id AS VARCHAR)))"),
            P("to-date-bad-null", "TO_DATE(order_number)"),
            P("to-date-invalid-day-null", "TO_DATE('2026-02-30')"),
            P("to-date-format", "TO_DATE(CONCAT('0', CAST(city_id AS VARCHAR), '/03/2026'), 'dd/MM/yyyy')"),
            P(
                "to-date-format-unparsed",
                "CAST(TO_DATE(status, 'dd/MM/yyyy') AS VARCHAR)",
                differs=_TO_DATE_LENIENT,
                daggers=_by_city((1, None), (2, None)),
            ),
            P("encode", "ENCODE(status, 'UTF-8')"),
            P("decode-encode", "DECODE(ENCODE(status, 'UTF-8'), 'UTF-8')"),
            P("encode-utf16", "ENCODE(order_number, 'UTF-16BE')"),
            P("decode-latin1", "DECODE(ENCODE(order_number, 'ISO-8859-1'), 'ISO-8859-1')"),
            P("timestampadd-week", "TIMESTAMPADD(WEEK, 2, rowtime)"),
            P("timestampadd-quarter", "TIMESTAMPADD(QUARTER, city_id, rowtime)"),
            P("timestampadd-month-end", "TIMESTAMPADD(MONTH, 1, TIMESTAMP '2026-01-31 10:00:00')"),
            P("timestampdiff-week", "TIMESTAMPDIFF(WEEK, TIMESTAMP '2026-01-01 00:00:00', rowtime)"),
            P("timestampdiff-month", "TIMESTAMPDIFF(MONTH, TIMESTAMP '2025-01-31 00:00:00', rowtime)"),
            P("floor-to-week", "FLOOR(rowtime TO WEEK)"),
            P("ceil-to-week", "CEIL(rowtime TO WEEK)"),
            P("floor-sunday-to-week", "FLOOR(TIMESTAMP '2026-03-01 10:00:00' TO WEEK)"),
            P("ceil-to-week-on-its-start", "CEIL(TIMESTAMP '2026-03-01 00:00:00' TO WEEK)"),
            P("floor-to-month", "FLOOR(rowtime TO MONTH)"),
            P("floor-to-quarter", "FLOOR(rowtime TO QUARTER)"),
            P("ceil-to-quarter", "CEIL(rowtime TO QUARTER)"),
            P("floor-to-year", "FLOOR(rowtime TO YEAR)"),
            P("ceil-to-year", "CEIL(rowtime TO YEAR)"),
            P("floor-date-to-week", "FLOOR(CAST(rowtime AS DATE) TO WEEK)"),
            P("ceil-date-to-month", "CEIL(CAST(rowtime AS DATE) TO MONTH)"),
            P("plus-year-to-month", "rowtime + INTERVAL '1-2' YEAR TO MONTH"),
            P("minus-month-end", "TIMESTAMP '2026-03-31 10:00:00' - INTERVAL '1' MONTH"),
            P("date-plus-months", "CAST(rowtime AS DATE) + INTERVAL '3' MONTH"),
            P("plus-day-to-second", "rowtime + INTERVAL '1 02:03:04.005' DAY TO SECOND"),
            P("interval-times-int", "rowtime + INTERVAL '1' MINUTE * city_id"),
            P("now-after-rowtime", "NOW() > rowtime"),
            P("current-timestamp-after-rowtime", "CURRENT_TIMESTAMP > rowtime"),
            P("current-date", "CURRENT_DATE >= DATE '2026-03-02'"),
            P("unix-timestamp-now", "UNIX_TIMESTAMP() > 1772445600"),
            P("date-format-full-millis", "DATE_FORMAT(rowtime, 'yyyy-MM-dd HH:mm:ss.SSS')"),
            P("date-format-day-name", "DATE_FORMAT(rowtime, 'EEE')"),
            P("date-format-day-name-long", "DATE_FORMAT(rowtime, 'EEEE')"),
            P("date-format-month-name", "DATE_FORMAT(rowtime, 'dd MMM yyyy')"),
            P("date-format-am-pm", "DATE_FORMAT(rowtime, 'hh:mm a')"),
            P("date-format-day-of-year", "DATE_FORMAT(rowtime, 'D')"),
            P("date-format-year-u", "DATE_FORMAT(rowtime, 'uuuu-MM')"),
            P("date-format-tenths", "DATE_FORMAT(rowtime, 'ss.S')"),
            P("date-format-hundredths", "DATE_FORMAT(rowtime, 'ss.SS')"),
            P("date-format-micros", "DATE_FORMAT(rowtime, 'ss.SSSSSS')"),
            P("date-format-quoted", "DATE_FORMAT(rowtime, 'yyyy-MM-dd''T''HH:mm:ss')"),
            P(
                "date-format-text",
                "DATE_FORMAT(CONCAT('2026-03-02 10:00:0', CAST(city_id AS VARCHAR), '.123'), 'HH:mm:ss.SSS')",
            ),
            P("date-format-bad-text-null", "DATE_FORMAT(status, 'yyyy')"),
            P("unix-timestamp-text", "UNIX_TIMESTAMP('2026-03-02 10:00:00')"),
            P(
                "unix-timestamp-millis-text",
                "UNIX_TIMESTAMP('2026-03-02 10:00:00.500', 'yyyy-MM-dd HH:mm:ss.SSS')",
            ),
            P("from-unixtime-negative", "FROM_UNIXTIME(city_id - 100)"),
            P("cast-bigint-to-int-wraps", "CAST(fare_idr * 100000 AS INT)"),
            P("cast-bigint-to-smallint", "CAST(fare_idr AS SMALLINT)"),
            P("cast-bigint-to-tinyint", "CAST(fare_idr AS TINYINT)"),
            P("cast-double-to-int-saturates", "CAST(pickup_long * 100000000 AS INT)"),
            P("cast-negative-double-to-int", "CAST(-pickup_long * 100000000 AS INT)"),
            P("cast-double-to-bigint-saturates", "CAST(pickup_long * 1e18 AS BIGINT)"),
            P("cast-double-to-smallint", "CAST(pickup_long * 1000 AS SMALLINT)"),
            P("cast-float-to-int", "CAST(CAST(pickup_long * 100000000 AS FLOAT) AS INT)"),
            P("cast-nan-to-int", "CAST(POWER(city_id - 10, 0.5) AS INT)"),
            P("cast-infinity-to-int", "CAST(POWER(city_id - city_id, -1) AS INT)"),
            P("cast-decimal-to-int-wraps", "CAST(CAST(fare_idr AS DECIMAL(20, 0)) * 100000 AS INT)"),
            P("cast-decimal-fraction-to-int", "CAST(CAST(-2.7 AS DECIMAL(3, 1)) AS INT)"),
            P("cast-string-fraction-to-int", "CAST(CONCAT(CAST(city_id AS VARCHAR), '.9') AS INT)"),
            P("cast-string-negative-fraction", "CAST(CONCAT('-', CAST(city_id AS VARCHAR), '.9') AS INT)"),
            P("cast-string-dot-start", "CAST(CONCAT('.', CAST(city_id AS VARCHAR)) AS INT)"),
            P("cast-string-fraction-to-bigint", "CAST('12345678901.99' AS BIGINT)"),
            P("cast-string-plus-sign", "CAST(CONCAT('+', CAST(city_id AS VARCHAR)) AS INT)"),
            P("cast-string-spaces", "CAST(CONCAT(' ', CAST(city_id AS VARCHAR), ' ') AS INT)"),
            P("try-cast-string-fraction", "TRY_CAST(CONCAT(CAST(city_id AS VARCHAR), '.7') AS INT)"),
            P("try-cast-out-of-range-null", "TRY_CAST(CONCAT('300000000', CAST(city_id AS VARCHAR)) AS INT)"),
            P("try-cast-bad-null", "TRY_CAST(status AS INT)"),
            P("try-cast-exponent", "TRY_CAST(CONCAT(CAST(city_id AS VARCHAR), 'e2') AS DOUBLE)"),
            P("try-cast-timestamp-null", "TRY_CAST(order_number AS TIMESTAMP(3))"),
            P("div-double-by-zero", "pickup_lat / (city_id - 1)"),
            P("div-double-by-double-zero", "pickup_lat / (pickup_lat - pickup_lat)"),
            P("div-zero-by-zero", "(pickup_lat - pickup_lat) / (pickup_lat - pickup_lat)"),
            P("div-bigint-by-double-zero", "fare_idr / (pickup_lat - pickup_lat)"),
            P("round-negative-half", "ROUND(-2.5)"),
            P("round-half-double", "ROUND(CAST(city_id AS DOUBLE) - 3.5)"),
            P("round-negative-half-decimal", "ROUND(CAST(city_id - 3.5 AS DECIMAL(5, 1)))"),
            P("round-decimal-places", "ROUND(-CAST(city_id AS DECIMAL(6, 3)) - 0.125, 2)"),
            P("round-int-negative-places", "ROUND(city_id * 15, -1)"),
            P("round-float", "ROUND(CAST(pickup_lat AS FLOAT), 1)"),
            P("mod-negative-divisor", "MOD(city_id + 6, -3)"),
            P("mod-both-negative", "MOD(-city_id - 6, -4)"),
            P("mod-negative-literal", "MOD(-7, 3)"),
            P("percent-negative-dividend", "(0 - fare_idr) % 7000"),
            P("power-negative-base", "POWER(city_id - 3, 3)"),
            P("power-negative-base-fraction", "POWER(city_id - 10, 0.5)"),
            P("power-negative-exponent", "POWER(city_id - 3, -1)"),
            P("power-zero-negative-exponent", "POWER(city_id - city_id, -1)"),
        ),
    ),
    Group(
        "fn-edge-aggregates",
        "LISTAGG, FIRST_VALUE and LAST_VALUE in a window",
        _AGG_KEYS,
        _AGG_SOURCE,
        (
            P("listagg", "LISTAGG(order_number)"),
            P("listagg-separator", "LISTAGG(order_number, ';')"),
            P("listagg-nulls", "LISTAGG(NULLIF(status, 'COMPLETED'), '|')"),
            P("first-value", "FIRST_VALUE(order_number)"),
            P("last-value", "LAST_VALUE(fare_idr)"),
            P("first-value-skips-nulls", "FIRST_VALUE(NULLIF(fare_idr, 25000))"),
            P("last-value-skips-nulls", "LAST_VALUE(NULLIF(fare_idr, 0))"),
        ),
    ),
]


#: Flink expressions Daggers refuses before Spark starts: (id, query, line, column, the start of the reason).
_REFUSED: list[tuple[str, str, int, int, str]] = [
    (
        "similar-to",
        "SELECT order_number,\n  status SIMILAR TO 'C%' AS c\nFROM bookings",
        2,
        3,
        "SIMILAR TO is not supported",
    ),
    (
        "is-json",
        "SELECT order_number,\n  status IS JSON AS j\nFROM bookings",
        2,
        3,
        "IS JSON is not supported",
    ),
    (
        "overlaps",
        "SELECT order_number,\n  (rowtime, INTERVAL '1' HOUR) OVERLAPS "
        "(TIMESTAMP '2026-03-02 10:30:00', INTERVAL '1' HOUR) AS o\nFROM bookings",
        2,
        4,
        "OVERLAPS is not supported",
    ),
    (
        "typeof",
        "SELECT order_number,\n  TYPEOF(city_id) AS t\nFROM bookings",
        2,
        3,
        "TYPEOF is not supported",
    ),
    (
        "proctime",
        "SELECT order_number,\n  PROCTIME() > rowtime AS p\nFROM bookings",
        2,
        3,
        "PROCTIME() is not supported",
    ),
    (
        "json-value",
        "SELECT order_number,\n  JSON_VALUE(CONCAT('{\"k\": \"', order_number, '\"}'), '$.k') AS k\n"
        "FROM bookings",
        2,
        3,
        "JSON_VALUE is not supported",
    ),
    (
        "json-query",
        "SELECT order_number,\n  JSON_QUERY('{\"a\": [1, 2]}', '$.a') AS a\nFROM bookings",
        2,
        3,
        "JSON_QUERY is not supported",
    ),
    (
        "json-exists",
        "SELECT order_number,\n  JSON_EXISTS(CONCAT('{\"', status, '\": 1}'), '$.COMPLETED') AS e\n"
        "FROM bookings",
        2,
        3,
        "JSON_EXISTS is not supported",
    ),
    (
        "date-format-zone",
        "SELECT order_number,\n  DATE_FORMAT(rowtime, 'HH:mm Z') AS t\nFROM bookings",
        2,
        3,
        "DATE_FORMAT pattern 'HH:mm Z': 'Z' (a time zone) is not supported",
    ),
    (
        "date-format-week-of-year",
        "SELECT order_number,\n  DATE_FORMAT(rowtime, 'w') AS w\nFROM bookings",
        2,
        3,
        "datetime pattern 'w': 'w' (week of year) is not supported",
    ),
    (
        "from-unixtime-day-of-week",
        "SELECT order_number,\n  FROM_UNIXTIME(1772445600, 'u') AS d\nFROM bookings",
        2,
        3,
        "datetime pattern 'u': 'u' (day number of week) is not supported",
    ),
]


def _group_case(group: Group) -> Case:
    from bench.flink_compat.cases import Case

    flink = group.query(flink=True)
    dagger = group.query(flink=False)
    differ = [p for p in group.probes if p.differs]
    text = "; ".join(f"{p.id}: {p.differs}" for p in differ)
    return Case(
        group.id,
        group.what + f" ({len(group.probes)} expressions, each its own case)",
        dagger,
        flink_sql=flink if flink != dagger else None,
        differs=text if flink != dagger else "",
    )


_OVERFLOW = (
    "Flink's integer + - * wrap around past their type's range (2147483647 + 1 is -2147483648), silently; "
    "Spark's ANSI arithmetic stops the dagger with an overflow error instead of writing a wrong number. "
    "Cast an operand to BIGINT (or DECIMAL(38, 0)) where a result can pass the type's range"
)


def _edge_cases() -> list[Case]:
    """Whole queries at the edges: a dagger that stops where Flink stops or wraps around, and the order of
    LISTAGG/FIRST_VALUE/LAST_VALUE across micro-batches."""
    from bench.flink_compat.cases import Case

    return [
        Case(
            "integer-overflow",
            "INT + INT and BIGINT * BIGINT past the type's range",
            "SELECT order_number, city_id + 2147483647 AS int_sum, fare_idr * 922337203685477 AS bigint_product\n"
            "FROM bookings",
            differs=_OVERFLOW,
            daggers_error="[ARITHMETIC_OVERFLOW]",
        ),
        Case(
            "integer-division-by-zero",
            "integer division by zero stops the job on both engines",
            "SELECT order_number, fare_idr / (city_id - 1) AS q\nFROM bookings",
            daggers_error="[DIVIDE_BY_ZERO]",
        ),
        Case(
            "decimal-division-by-zero",
            "DECIMAL division by zero stops the job on both engines",
            "SELECT order_number, CAST(fare_idr AS DECIMAL(12, 2)) / (city_id - 1) AS q\nFROM bookings",
            daggers_error="[DIVIDE_BY_ZERO]",
        ),
        Case(
            "listagg-first-last-batches",
            "LISTAGG, FIRST_VALUE and LAST_VALUE over a window read one event per "
            "micro-batch: the order of arrival across batches",
            """SELECT vehicle_type, LISTAGG(order_number) AS orders, FIRST_VALUE(order_number) AS first_order,
  LAST_VALUE(order_number) AS last_order, LAST_VALUE(NULLIF(fare_idr, 0)) AS last_fare,
  TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), vehicle_type""",
            one_record_batches=True,
        ),
    ]


def function_cases() -> list[Case]:
    """One case per group (its golden file holds Flink's rows of every probe), and the whole edge cases."""
    return [_group_case(g) for g in GROUPS] + _edge_cases()


def function_refusals() -> list[Refusal]:
    from bench.flink_compat.cases import Refusal

    return [Refusal(*r) for r in _REFUSED]


def probes() -> list[tuple[Group, int, Probe]]:
    """Every probe with its group and its column's index in the group's rows."""
    return [(g, g.key_count + i, p) for g in GROUPS for i, p in enumerate(g.probes)]
