"""Move per-row geo functions out of Spark and into the Kafka source.

``S2Id(lat, long, 13)`` over a stream's own columns is computed by the source while it decodes each
Arrow batch (numpy, in the same Python worker that already holds the batch), and the query reads a
column instead. Spark then runs no Python UDF for it: no extra Arrow round trip between the JVM and a
Python worker per row. A pure function over the AST, like the rewrites in :mod:`job.sql.rewrite`.

With ``int_keys`` (the default for new daggers) the source column holds the signed 64-bit cell id
(``s2cell``) rather than its decimal text: a ``GROUP BY S2Id(...)`` then groups, shuffles and keeps
window state on an 8-byte key, and every other use reads ``CAST(column AS STRING)``, so the query's
results are the same text as before. A checkpoint whose window state was keyed on the text keeps
the text (``s2id``), see :func:`job.query.plan.engine_features`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlglot import exp

DERIVED_PREFIX = "__dagger_s2_"


@dataclass(frozen=True)
class DerivedColumn:
    """A column the source computes: ``name`` = ``function(*args)``; ``args`` are column names, then literals."""

    name: str
    function: str  # s2id: the decimal text of the signed id; s2cell: the signed 64-bit id
    lat: str
    lng: str
    level: int

    @property
    def inputs(self) -> tuple[str, ...]:
        """The stream's columns it is computed from."""
        return (self.lat, self.lng)

    def spark_expr(self) -> str:
        """Return the Spark SQL expression (over the stream's columns) that computes this column, for a
        batch over data that did not come through the source."""
        call = f"S2Id(`{self.lat}`, `{self.lng}`, {self.level})"
        return f"CAST({call} AS BIGINT)" if self.function == "s2cell" else call

    def to_json(self) -> list[object]:
        """Return the JSON form carried in the source's options."""
        return [self.name, self.function, self.lat, self.lng, self.level]

    @classmethod
    def from_json(cls, data: list[object]) -> DerivedColumn:
        """Inverse of :meth:`to_json`."""
        name, function, lat, lng, level = data
        return cls(str(name), str(function), str(lat), str(lng), int(str(level)))


def source_table(select: exp.Select, streams: Collection[str]) -> tuple[str, set[str]] | None:
    """Return (stream table, the names that may qualify its columns) when ``select`` reads exactly one
    stream table directly (no joins, no lateral tables); else None."""
    src = select.args.get("from_") or select.args.get("from")
    if src is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    table = src.this
    if not isinstance(table, exp.Table) or table.name not in streams:
        return None
    return table.name, {table.name, table.alias_or_name}


def _level(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
        level = int(node.name)
        return level if 0 <= level <= 30 else None
    return None


def push_down_s2(
    tree: exp.Expr, streams: set[str], *, int_keys: bool = True
) -> tuple[exp.Expr, dict[str, list[DerivedColumn]]]:
    """Replace ``S2Id(<col>, <col>, <level literal>)`` over a stream read directly by a source column.

    With ``int_keys`` the column is the 64-bit id: a GROUP BY item reads it as it is, any other use
    reads ``CAST(column AS STRING)``. Returns the new tree (the input is not changed) and, per stream table, the columns its source must
    add. Calls over anything else (expressions, subquery columns, joined tables) are left as they are.
    """
    tree = tree.copy()
    derived: dict[str, dict[str, DerivedColumn]] = {}
    for select in list(tree.find_all(exp.Select)):
        found = source_table(select, streams)
        if found is None:
            continue
        table, qualifiers = found
        for call in list(select.find_all(exp.Anonymous)):
            if call.name.upper() != "S2ID" or call.find_ancestor(exp.Select) is not select:
                continue
            args = call.expressions
            if len(args) != 3 or not all(isinstance(a, exp.Column) for a in args[:2]):
                continue
            lat, lng = args[0], args[1]
            if any(c.table and c.table not in qualifiers for c in (lat, lng)):
                continue
            level = _level(args[2])
            if level is None:
                continue
            col = DerivedColumn(
                f"{DERIVED_PREFIX}{lat.name}_{lng.name}_{level}",
                "s2cell" if int_keys else "s2id",
                lat.name,
                lng.name,
                level,
            )
            derived.setdefault(table, {})[col.name] = col
            ref = exp.column(col.name, table=lat.table or None)
            if int_keys and not isinstance(call.parent, exp.Group):
                call.replace(exp.Cast(this=ref, to=exp.DataType.build("string")))
            else:
                call.replace(ref)
    return tree, {t: list(cols.values()) for t, cols in derived.items()}


def batch_order(tree: exp.Expr, streams: Mapping[str, set[str]]) -> dict[str, str]:
    """Return, per stream table (-> the columns its source hands to Spark), the column its source may
    sort each batch by (stably).

    A stream read by exactly one SELECT, directly and with a GROUP BY whose first item is one of
    its columns, is grouped on that column: rows with the same key stay in their order, so the
    result is the same, and Spark's aggregation, which sorts every batch by the group key, gets
    sorted runs instead of rows in arrival order (its map-side sort fell from 31% to 19% of the
    executor CPU of workload (a)). Apply after :func:`job.sql.rewrite.put_window_keys_last`.
    """
    readers: dict[str, list[exp.Select]] = {}
    for select in tree.find_all(exp.Select):
        tables = {
            t.name
            for t in select.find_all(exp.Table)
            if t.name in streams and t.find_ancestor(exp.Select) is select
        }
        for table in tables:
            readers.setdefault(table, []).append(select)
    order: dict[str, str] = {}
    for table, selects in readers.items():
        found = source_table(selects[0], streams) if len(selects) == 1 else None
        group = selects[0].args.get("group") if found else None
        if found is None or group is None or not group.expressions:
            continue
        first = group.expressions[0]
        if (
            isinstance(first, exp.Column)
            and first.name in streams[table]
            and (not first.table or first.table in found[1])
        ):
            order[table] = first.name
    return order
