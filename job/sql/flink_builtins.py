"""Flink built-in functions that Spark lacks or computes otherwise, each a small pure rewrite into Spark's.

Checked against Flink 2.3 (bench/flink_compat's function groups):

* ``SHA224``/``SHA256``/``SHA384``/``SHA512(s)`` → ``sha2(s, n)``;
* ``IS_DIGIT(s)``/``IS_ALPHA(s)``: TRUE when s is not empty and every character is a (Unicode) digit/letter,
  FALSE for NULL (Flink's ``StringUtils.isNumeric``/``isAlpha``); an integer is always digits;
* ``TO_TIMESTAMP_LTZ(n, 0)``/``TO_TIMESTAMP_LTZ(n, 3)`` of epoch seconds/milliseconds → ``timestamp_seconds``/
  ``timestamp_millis`` (Spark's ``to_timestamp_ltz`` reads only text);
* ``LOG10(x)`` → Spark's ``log10`` (sqlglot reads it as ``LOG(10, x)``, a division of logarithms that can
  differ from Flink's ``Math.log10`` in the last digit); :mod:`job.sql.dialect` marks the call;
* ``REGEXP_EXTRACT(s, r[, i])`` is NULL when r does not match s (Spark's is ''), and i is 0 (the whole match)
  when not given (Spark's default is 1); an index over the regex's groups is refused (Spark fails the job);
* ``TO_TIMESTAMP(s[, format])`` is NULL for text that does not parse (Spark fails the job) → ``try_to_timestamp``;
* ``FROM_BASE64(s)`` is a STRING (Spark's ``unbase64`` is BINARY);
* ``INITCAP(s)`` starts a word after any character but ``[A-Za-z0-9]`` (``DRIVER_FOUND`` → ``Driver_Found``; Spark
  only after a space) and changes only ASCII letters (Calcite's ``initcap``).

* ``REGEXP_EXTRACT`` of a group that takes no part in the match is NULL (Spark's is ''): an empty group is told
  from one that took no part by a back-reference to it, which fails for a group that took no part;
* ``TO_DATE(s[, format])`` is NULL for text that does not parse (Spark fails the job) → ``try_to_date``;
* ``STR_TO_MAP(s[, list_sep, key_sep])``: Flink's separators (',' and '='; Spark's are ',' and ':'), trailing
  empty pairs dropped (Java's ``String.split``), the last value of a repeated key (Spark fails the job);
* ``LOCATE(sub, s, pos)`` searches from 1 when pos < 1 (Spark finds nothing); ``SUBSTRING(s, start, n)`` is NULL
  for n < 0 (Spark's is '');
* ``FIRST_VALUE(x)``/``LAST_VALUE(x)`` skip NULLs (Spark's keep them).

Refused (Spark has no counterpart; each SqlError says what to write instead): ``SIMILAR TO``, ``IS JSON``,
``OVERLAPS``, ``TYPEOF`` (Spark's names differ), ``PROCTIME()`` (no processing-time attributes), ``JSON_VALUE``,
``JSON_QUERY``, ``JSON_EXISTS`` (the Dagger function ``JsonQuery`` instead).
"""

from __future__ import annotations

import re

from sqlglot import exp

from job.sql.calls import build as _build_any
from job.sql.calls import fail, number_literal, string_literal
from job.sql.infer import infer, is_integer, is_string
from job.sql.library import bottom_up

_SHA2 = {"sha224": 224, "sha256": 256, "sha384": 384, "sha512": 512}
#: Java regular expressions of Flink's character classes: Character.isDigit (Nd) and Character.isLetter (L)
_CLASSES = {"is_digit": "^\\p{Nd}+$", "is_alpha": "^\\p{L}+$"}
#: the names :mod:`job.sql.catalog` knows as Flink functions because of this module
NAMES = frozenset({*_SHA2, *_CLASSES, "proctime", "json_value", "json_query", "json_exists"})
LOG10_META = "flink_log10"  # meta key on the exp.Log that LOG10(x) reads as


def build(template: str, args: list[exp.Expr]) -> exp.Expr:
    return _build_any(template, args, plain_casts=True)


def _name(node: exp.Expr) -> str:
    return node.name.lower() if isinstance(node, exp.Anonymous) else ""


def _args(node: exp.Expr, want: int, signature: str) -> list[exp.Expr]:
    args = list(node.expressions)
    if len(args) != want:
        raise fail(f"{signature} takes {want} argument{'s' if want > 1 else ''}, found {len(args)}", node)
    return args


def _character_class(node: exp.Expr, name: str) -> exp.Expr:
    (arg,) = _args(node, 1, f"{name.upper()}(s)")
    kind = infer(arg)
    if is_integer(kind) and name == "is_digit":
        return exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null()))
    if kind is not None and not is_string(kind):
        raise fail(
            f"{name.upper()} takes a string, found {kind.sql(dialect='spark')}",
            arg,
            hint=f"{name.upper()}(CAST(x AS VARCHAR))",
        )
    match = exp.RegexpLike(this=arg.copy(), expression=exp.Literal.string(_CLASSES[name]))
    return exp.Coalesce(this=match, expressions=[exp.false()])


def _to_timestamp_ltz(node: exp.Expr) -> exp.Expr:
    args = list(node.expressions)
    if not args or len(args) > 2:
        raise fail(f"TO_TIMESTAMP_LTZ takes 1 or 2 arguments, found {len(args)}", node)
    value = args[0]
    if is_string(infer(value)) or string_literal(value) is not None:
        return node  # TO_TIMESTAMP_LTZ(text[, format]): Spark's own
    digits = number_literal(args[1]) if len(args) == 2 else 3.0
    if digits not in (0.0, 3.0):
        raise fail(
            "TO_TIMESTAMP_LTZ(n, precision): the precision must be 0 (epoch seconds) or 3 (epoch "
            "milliseconds)",
            args[1] if len(args) == 2 else node,
            hint="TO_TIMESTAMP_LTZ(epoch_millis, 3)",
        )
    call = "timestamp_seconds" if digits == 0.0 else "timestamp_millis"
    return exp.Anonymous(this=call, expressions=[value.copy()])


_LOWER, _UPPER = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_INITCAP = (
    f"array_join(transform(split(__a0, '(?<=[^A-Za-z0-9])', -1), __w -> concat("
    f"translate(substr(__w, 1, 1), '{_LOWER}', '{_UPPER}'), translate(substr(__w, 2), '{_UPPER}', '{_LOWER}'))), '')"
)
_DEFAULT_TIME_FORMAT = "yyyy-MM-dd HH:mm:ss"


#: Flink's STR_TO_MAP: Java's split (trailing empty parts dropped), each pair split at its first key separator (a
#: key without one has a NULL value), the last value of a repeated key
_STR_TO_MAP = (
    "aggregate(slice(split(__a0, __a1, -1), 1, coalesce(array_max(transform(split(__a0, __a1, -1), "
    "(__x, __i) -> IF(__x = '', 0, __i + 1))), 0)), CAST(map() AS MAP<STRING, STRING>), "
    "(__m, __p) -> map_concat(map_filter(__m, (__k, __v) -> __k <> element_at(split(__p, __a2, 2), 1)), "
    "map(element_at(split(__p, __a2, 2), 1), try_element_at(split(__p, __a2, 2), 2))))"
)


def _written(node: exp.Expr | None) -> bool:
    """Whether an argument was written in the query (sqlglot fills in Spark's defaults, without a position)."""
    return node is not None and (not isinstance(node, exp.Literal) or "line" in node.meta)


def _str_to_map(node: exp.StrToMap) -> exp.Expr:
    pairs, keys = node.args.get("pair_delim"), node.args.get("key_value_delim")
    return build(
        _STR_TO_MAP,
        [
            node.this,
            pairs if pairs is not None and _written(pairs) else exp.Literal.string(","),
            keys if keys is not None and _written(keys) else exp.Literal.string("="),
        ],
    )


def _locate(node: exp.StrPosition) -> exp.Expr:
    """LOCATE(sub, s, pos): Flink searches from 1 when pos < 1 (Spark finds nothing)."""
    pos = node.args.get("position")
    if pos is None:
        return node
    value = number_literal(pos)
    if value is not None and value >= 1:
        return node
    out = node.copy()
    if value is not None:
        out.set("position", exp.Literal.number(1))
        return out
    out.set("position", build("IF(__a0 < 1, 1, __a0)", [pos]))  # and NULL for a NULL pos (Spark's is 0)
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.Is(this=pos.copy(), expression=exp.Null()),
                true=exp.Cast(this=exp.Null(), to=exp.DataType.build("INT")),
            )
        ],
        default=out,
    )


def _substring(node: exp.Substring) -> exp.Expr:
    """SUBSTRING(s, start, n) is NULL for n < 0 on Flink ('' on Spark)."""
    length = node.args.get("length")
    if length is None:
        return node
    value = number_literal(length)
    if value is not None and value >= 0:
        return node
    if value is not None:
        return exp.Cast(this=exp.Null(), to=exp.DataType.build("STRING"))
    return exp.Case(
        ifs=[
            exp.If(
                this=build("__a0 < 0", [length]),
                true=exp.Cast(this=exp.Null(), to=exp.DataType.build("STRING")),
            )
        ],
        default=node.copy(),
    )


def _regexp_extract(node: exp.RegexpExtract) -> exp.Expr:
    group = node.args.get("group")
    if group is None or not _written(group):  # not written: sqlglot's default is Spark's 1, Flink's is 0
        group = exp.Literal.number(0)
    regex, index = string_literal(node.expression), number_literal(group)
    if regex is not None and index is not None:
        try:
            groups = re.compile(regex).groups
        except re.error:
            groups = None
        if groups is not None and not 0 <= index <= groups:
            raise fail(
                f"REGEXP_EXTRACT: the regular expression {regex!r} has {groups} group(s), so the index must be "
                f"0 to {groups}, found {group.sql(dialect='spark')}",
                group,
                hint="the index counts the regex's groups from 1; 0 is the whole match",
            )
    extract = exp.Anonymous(
        this="regexp_extract", expressions=[node.this.copy(), node.expression.copy(), group.copy()]
    )
    match = exp.RegexpLike(this=node.this.copy(), expression=node.expression.copy())
    if index == 0:
        return exp.Case(ifs=[exp.If(this=match, true=extract)])
    # '' from a group that took part (it matched nothing) or took none (Flink: NULL): a back-reference to it after the
    # match succeeds only in the first case
    if regex is not None and index is not None:
        took_part: exp.Expr = exp.Literal.string(f"(?:{regex})\\{int(index)}")
    else:
        took_part = build("concat('(?:', __a0, ')\\', CAST(__a1 AS STRING))", [node.expression, group])
    return build(
        "CASE WHEN NOT __a0 THEN NULL WHEN __a1 <> '' OR __a3 = 0 OR regexp_like(__a2, __a4) THEN __a1 END",
        [match, extract, node.this, group, took_part],
    )


_JSON = {
    "JSON_VALUE": "JsonQuery(json, path) gives a scalar as text (and an object or array as JSON text)",
    "JSON_QUERY": "JsonQuery(json, path) gives an object or array as JSON text (and a scalar as text)",
    "JSON_EXISTS": "JsonQuery(json, path) IS NOT NULL (false for a JSON null, as JSON_EXISTS)",
}


def _refuse(node: exp.Expr) -> None:
    """Raise SqlError at a Flink operator that Spark has no counterpart for."""
    if isinstance(node, exp.SimilarTo):
        raise fail(
            "SIMILAR TO is not supported",
            node,
            hint="match a Java regular expression with REGEXP(s, '^C.*$'), or use LIKE",
        )
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.JSON):
        raise fail(
            "IS JSON is not supported",
            node,
            hint="JsonQuery(s, '$') IS NOT NULL is true for a JSON object or array",
        )
    if isinstance(node, exp.Typeof):
        raise fail(
            "TYPEOF is not supported: Spark names types otherwise ('int' for Flink's 'INT NOT NULL')",
            node,
            hint="the columns' types are the stream's protobuf fields' (docs/sql.md); CAST(x AS t) makes a "
            "type sure",
        )
    if isinstance(node, exp.Anonymous) and node.name.upper() in _JSON:
        raise fail(f"{node.name.upper()} is not supported", node, hint=_JSON[node.name.upper()])
    if isinstance(node, exp.Anonymous) and node.name.upper() == "PROCTIME":
        raise fail(
            "PROCTIME() is not supported: windows, joins and deduplication run on event time",
            node,
            hint="CURRENT_TIMESTAMP for the time a row is processed; rowtime for windows",
        )
    if isinstance(node, exp.Overlaps):
        raise fail(
            "OVERLAPS is not supported", node, hint="compare the bounds: a_start < b_end AND b_start < a_end"
        )


def rewrite_flink_builtins(tree: exp.Expr) -> exp.Expr:
    """Rewrite the calls of Flink built-ins that Spark has not (or computes otherwise) into Spark's; raise
    SqlError at an operator Spark has no counterpart for."""

    def visit(node: exp.Expr) -> exp.Expr:
        _refuse(node)
        name = _name(node)
        if name in _SHA2:
            (arg,) = _args(node, 1, f"{name.upper()}(s)")
            return exp.Anonymous(this="sha2", expressions=[arg.copy(), exp.Literal.number(_SHA2[name])])
        if name in _CLASSES:
            return _character_class(node, name)
        if name == "to_timestamp_ltz":
            return _to_timestamp_ltz(node)
        if isinstance(node, exp.Log) and node.meta.get(LOG10_META):
            return exp.Anonymous(this="log10", expressions=[node.expression.copy()])
        if isinstance(node, exp.RegexpExtract):
            return _regexp_extract(node)
        if isinstance(node, exp.StrToTime):  # TO_TIMESTAMP(s, format)
            fmt = node.args.get("format") or exp.Literal.string(_DEFAULT_TIME_FORMAT)
            return exp.Anonymous(this="try_to_timestamp", expressions=[node.this.copy(), fmt.copy()])
        if (
            type(node) is exp.Cast
            and node.to.this == exp.DataType.Type.TIMESTAMP
            and not isinstance(node.this, exp.Literal)
        ):  # TO_TIMESTAMP(s); a user's CAST is a TryCast
            return exp.Anonymous(
                this="try_to_timestamp",
                expressions=[node.this.copy(), exp.Literal.string(_DEFAULT_TIME_FORMAT)],
            )
        if isinstance(node, exp.FromBase64) and not isinstance(node.parent, exp.Cast):
            return exp.Cast(this=node.copy(), to=exp.DataType.build("STRING"))
        if isinstance(node, exp.Initcap):
            return build(_INITCAP, [node.this])
        if isinstance(node, exp.StrToMap):
            return _str_to_map(node)
        if isinstance(node, exp.TsOrDsToDate) and (
            is_string(infer(node.this)) or string_literal(node.this) is not None
        ):
            fmt = node.args.get("format")
            return exp.Anonymous(
                this="try_to_date", expressions=[node.this.copy(), *([fmt.copy()] if fmt else [])]
            )
        if isinstance(node, exp.StrPosition):
            return _locate(node)
        if isinstance(node, exp.Substring):
            return _substring(node)
        if isinstance(node, exp.FirstValue | exp.LastValue) and not isinstance(node.parent, exp.Window):
            name = "first_value" if isinstance(node, exp.FirstValue) else "last_value"
            return exp.Anonymous(this=name, expressions=[node.this.copy(), exp.true()])
        return node

    return bottom_up(tree, visit)
