"""Feature-row functions (the original's Feast functions) as AST rewrites.

``FeaturesWithType`` and ``SingleFeatureWithType`` name each value's type, so they become Spark
built-ins (a ``named_struct`` per feature). ``Features`` takes the type from the value itself,
which only Spark knows: its per-event part is the Arrow UDF ``dagger_feature_rows``
(:mod:`job.functions.feature_rows`), its aggregate ``flatten(collect_list(...))``.
"""

from __future__ import annotations

from sqlglot import exp

from job.functions.feature_rows import FEATURE_ROWS_UDF, TIMESTAMP_TYPE, VALUE_FIELDS
from job.sql.calls import build, fail, string_literal

MAX_FEATURES = 128

_ZERO_IF_NULL = "coalesce(CAST(__v AS {t}), {zero})"
TYPES: dict[str, tuple[int, str]] = {
    # the original's ValueEnum: (index of the value field, Spark SQL of the value __v); like the
    # original, a NULL number is 0 and a NULL boolean false
    "ByteType": (0, "CAST(__v AS BINARY)"),
    "StringType": (1, "CAST(__v AS STRING)"),
    "IntegerType": (2, _ZERO_IF_NULL.format(t="INT", zero="0")),
    "LongType": (3, _ZERO_IF_NULL.format(t="BIGINT", zero="0L")),
    "DoubleType": (4, _ZERO_IF_NULL.format(t="DOUBLE", zero="0D")),
    "FloatType": (5, _ZERO_IF_NULL.format(t="FLOAT", zero="CAST(0 AS FLOAT)")),
    "BooleanType": (6, _ZERO_IF_NULL.format(t="BOOLEAN", zero="FALSE")),
    "TimestampType": (
        7,
        "IF(__v IS NULL, NULL, named_struct('seconds', unix_seconds(__v), 'nanos', "
        "CAST((unix_micros(__v) - unix_seconds(__v) * 1000000) * 1000 AS INT)))",
    ),
}
_BY_LOWER = {name.lower(): name for name in TYPES}
_SQL_TYPES = {
    "binary": "BINARY",
    "string": "STRING",
    "int": "INT",
    "bigint": "BIGINT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    TIMESTAMP_TYPE: "STRUCT<seconds: BIGINT, nanos: INT>",
}


def feature_type(fn: str, node: exp.Expr) -> str:
    """Return the ValueEnum name of a type argument; raise SqlError at it when it is not one."""
    text = string_literal(node)
    if text is None or text.lower() not in _BY_LOWER:
        found = node.sql(dialect="spark")
        raise fail(
            f"{fn}: a feature type must be a string literal, one of {', '.join(TYPES)}; found {found}", node
        )
    return _BY_LOWER[text.lower()]


def check_typed(fn: str, args: list[exp.Expr]) -> None:
    """Every third argument of FeaturesWithType/SingleFeatureWithType names a feature type."""
    for i in range(2, len(args), 3):
        feature_type(fn, args[i])


def _value(index: int, value_sql: str) -> str:
    fields = []
    for i, (name, sql_type) in enumerate(VALUE_FIELDS):
        fields.append(f"'{name}', " + (value_sql if i == index else f"CAST(NULL AS {_SQL_TYPES[sql_type]})"))
    return f"named_struct({', '.join(fields)})"


def _key(i: int) -> str:
    return f"coalesce(CAST(__a{i} AS STRING), 'null')"  # Java's String.valueOf


def _typed_features(fn: str, args: list[exp.Expr]) -> str:
    items = []
    for i in range(0, len(args), 3):
        index, value_sql = TYPES[feature_type(fn, args[i + 2])]
        value = _value(index, value_sql.replace("__v", f"__a{i + 1}"))
        items.append(f"named_struct('key', {_key(i)}, 'value', {value}, 'name', {_key(i)})")
    return f"array({', '.join(items)})"


def single_feature_with_type(args: list[exp.Expr]) -> exp.Expr:
    """One event's feature rows; equal (key, value, type) triplets once, as the original's map."""
    return build(f"array_distinct({_typed_features('SingleFeatureWithType', args)})", args)


def features_with_type(args: list[exp.Expr]) -> exp.Expr:
    """The feature rows of a window's events; equal (key, value, type) triplets once."""
    return build(f"array_distinct(flatten(collect_list({_typed_features('FeaturesWithType', args)})))", args)


def features(args: list[exp.Expr]) -> exp.Expr:
    """The feature rows of a window's events, every pair of every event in arrival order."""
    keys_and_values = ", ".join(_key(i) if i % 2 == 0 else f"__a{i}" for i in range(len(args)))
    return build(f"flatten(collect_list({FEATURE_ROWS_UDF}({keys_and_values})))", args)
