"""Flink's deduplication, ``ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime) = 1``, onto Spark's streaming
deduplication.

``SELECT cols FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime ASC) AS rn FROM t) WHERE rn = 1``
keeps each key's first row in event time. Flink 2.3 buffers a key's rows until the watermark passes them and
emits the earliest (insert-only), drops late rows, and drops every later row of an emitted key (its state is kept
for good). Spark's ``dropDuplicatesWithinWatermark(k)``, its keys kept for a century of event time, keeps each
key's first row to arrive, drops late rows and keeps its state as long: the same rows when a key's rows arrive
in event-time order, and a different row when a later-stamped duplicate arrives first, within the watermark's
delay.

:func:`mark_deduplications` checks the form (before the other checks, which refuse ``OVER``) and takes out
the row number, marking the subquery; :func:`extract_deduplications` (on the translated tree) turns each marked
subquery into a view, which the engine registers as the subquery's rows deduplicated by the keys
(``job.query.runner.register_dedup_views``). What cannot run so (the last row, Top-N, another order) is refused at
its line and column, saying what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from job.sql.calls import fail

#: Meta key on a subquery whose rows are deduplicated: the key column names.
DEDUP_META = "dagger_dedup_keys"
VIEW_PREFIX = "__dagger_dedup_"
TIME_COLUMN = "rowtime"
_FORM = (
    "SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY rowtime ASC) AS rn FROM t) "
    "WHERE rn = 1"
)
_TOP_N_HINT = (
    "for each key's first row in event time write " + _FORM + "; for the top N per window, "
    "GROUP BY a window and the key"
)


@dataclass(frozen=True)
class Deduplication:
    """A view the engine registers: the rows of ``spark_sql`` without duplicates of ``keys`` (first to arrive)."""

    view: str
    spark_sql: str
    keys: list[str]


def _row_number_item(select: exp.Select) -> tuple[int, exp.Window] | None:
    for i, item in enumerate(select.expressions):
        target = item.this if isinstance(item, exp.Alias) else item
        if isinstance(target, exp.Window) and isinstance(target.this, exp.RowNumber):
            return i, target
    return None


def _first_row_condition(where: exp.Expr, name: str) -> tuple[exp.Expr | None, list[exp.Expr]]:
    """Return (the ``rn = 1`` / ``rn <= 1`` / ``rn < 2`` conjunct, the other conjuncts) of a WHERE condition."""
    conjuncts: list[exp.Expr] = []

    def flatten(node: exp.Expr) -> None:
        if isinstance(node, exp.And):
            flatten(node.this)
            flatten(node.expression)
        else:
            conjuncts.append(node)

    flatten(where)
    found, rest = None, []
    for c in conjuncts:
        if (
            isinstance(c, exp.EQ | exp.LTE | exp.LT)
            and isinstance(c.this, exp.Column)
            and c.this.name == name
            and isinstance(c.expression, exp.Literal)
            and c.expression.name == ("2" if isinstance(c, exp.LT) else "1")
        ):
            found = c
        else:
            rest.append(c)
    return found, rest


def _check_order(window: exp.Window) -> None:
    order = window.args.get("order")
    keys = list(order.expressions) if order is not None else []
    if len(keys) != 1 or not isinstance(keys[0].this, exp.Column) or keys[0].this.name != TIME_COLUMN:
        raise fail(
            "ROW_NUMBER() OVER (...) orders by the event time only, for deduplication (Top-N retracts "
            "rows it has emitted, which a stream's sinks cannot take back)",
            window,
            hint=_TOP_N_HINT,
        )
    if keys[0].args.get("desc"):
        raise fail(
            "ROW_NUMBER() OVER (... ORDER BY rowtime DESC) (the last row per key) is not supported: it "
            "retracts the row it emitted when a later one comes",
            window,
            hint="keep the first row (ORDER BY rowtime ASC), or the last per window: GROUP BY a window and "
            "the key with MAX_BY(x, rowtime)",
        )
    if not window.args.get("partition_by"):
        raise fail(
            "ROW_NUMBER() OVER (ORDER BY rowtime) needs PARTITION BY the key to deduplicate on",
            window,
            hint=_FORM,
        )


def _key_name(key: exp.Expr, inner: exp.Select) -> str:
    """The name of a PARTITION BY key: a column's, or the name of the subquery's item that computes it (a window
    TVF's window_start, say). Raises SqlError at another expression."""
    if isinstance(key, exp.Column):
        return key.name
    same = next((i.alias for i in inner.expressions if isinstance(i, exp.Alias) and i.this == key), None)
    if same is None:
        raise fail("PARTITION BY of a deduplication names columns", key, hint=_FORM)
    return same


def qualify_as_subquery(tree: exp.Expr) -> exp.Expr:
    """Flink's ``SELECT items FROM t [WHERE c] QUALIFY ROW_NUMBER() OVER (w) = 1`` → ``SELECT items FROM (SELECT *,
    ROW_NUMBER() OVER (w) AS __dagger_rn0 FROM t [WHERE c]) AS t WHERE __dagger_rn0 = 1``, the form
    :func:`mark_deduplications` takes (a row number named in SELECT and in QUALIFY moves into the subquery too).
    A QUALIFY over a join or a GROUP BY is left as it is (and refused later)."""
    if not any(s.args.get("qualify") is not None for s in tree.find_all(exp.Select)):
        return tree
    tree = tree.copy()
    for select in [s for s in tree.find_all(exp.Select) if s.args.get("qualify") is not None]:
        source = select.args.get("from_") or select.args.get("from")
        if (
            source is None
            or select.args.get("joins")
            or select.args.get("group") is not None
            or not isinstance(source.this, exp.Table | exp.Subquery)
        ):
            continue
        condition = select.args["qualify"].this.copy()
        numbers: list[exp.Expr] = []
        for i, window in enumerate(
            w for w in list(condition.find_all(exp.Window)) if isinstance(w.this, exp.RowNumber)
        ):
            name = f"__dagger_rn{i}"
            numbers.append(exp.alias_(window.copy(), name))
            window.replace(exp.column(name))
        named = {c.name for c in condition.find_all(exp.Column)}
        for item in select.expressions:
            if isinstance(item, exp.Alias) and item.alias in named and isinstance(item.this, exp.Window):
                numbers.append(item.copy())
        alias = source.this.alias_or_name
        inner = exp.Select(expressions=[exp.Star(), *numbers]).from_(source.this.copy())
        if select.args.get("where") is not None:
            inner.set("where", select.args["where"].copy())
        moved = {n.alias for n in numbers}
        select.set(
            "expressions",
            [
                exp.column(i.alias) if isinstance(i, exp.Alias) and i.alias in moved else i
                for i in select.expressions
            ],
        )
        select.set(
            "from_" if "from_" in select.args else "from",
            exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias)))),
        )
        select.set("where", exp.Where(this=condition))
        select.set("qualify", None)
    return tree


def mark_deduplications(tree: exp.Expr) -> exp.Expr:
    """Return ``tree`` with each first-row deduplication's row number taken out and its subquery marked with
    its keys (:data:`DEDUP_META`). Raises SqlError at a ROW_NUMBER that is not one, saying what to write."""
    if not any(isinstance(w.this, exp.RowNumber) for w in tree.find_all(exp.Window)):
        return tree
    tree = qualify_as_subquery(tree).copy()
    for sub in list(tree.find_all(exp.Subquery)):
        inner, outer = sub.this, sub.parent.parent if isinstance(sub.parent, exp.From) else None
        if not isinstance(inner, exp.Select) or not isinstance(outer, exp.Select):
            continue
        found = _row_number_item(inner)
        if found is None:
            continue
        index, window = found
        item = inner.expressions[index]
        if not isinstance(item, exp.Alias):
            raise fail(
                "name the row number (ROW_NUMBER() OVER (...) AS rn) and keep its first row: WHERE rn = 1",
                window,
                hint=_FORM,
            )
        _check_order(window)
        where = outer.args.get("where")
        condition, rest = _first_row_condition(where.this, item.alias) if where is not None else (None, [])
        if condition is None:
            raise fail(
                f"ROW_NUMBER() OVER (...) is supported for deduplication, kept by WHERE {item.alias} = 1 "
                "(Top-N retracts rows it has emitted)",
                window,
                hint=_TOP_N_HINT,
            )
        if outer.args.get("joins"):
            raise fail(
                "a deduplication joined with another table is not supported",
                outer.args["joins"][0].this,
                hint="deduplicate in a subquery of its own, then join",
            )
        names = {c.alias_or_name for c in inner.expressions}
        if TIME_COLUMN not in names and not any(isinstance(c, exp.Star) for c in inner.expressions):
            if any(isinstance(c, exp.Star) for c in outer.expressions):
                raise fail(
                    f"a deduplication's subquery must output {TIME_COLUMN}, the event time it orders by, "
                    "when the query selects * from it",
                    inner.expressions[0],
                    hint=_FORM,
                )
            # Spark deduplicates within the watermark of the rows' event time: the subquery hands it on
            inner.set("expressions", [*inner.expressions, window.args["order"].expressions[0].this.copy()])
        keys = [_key_name(key, inner) for key in window.args["partition_by"]]
        used = [
            c
            for part in (outer.expressions, rest, [outer.args.get("group"), outer.args.get("having")])
            for node in part
            if node is not None
            for c in node.find_all(exp.Column)
            if c.name == item.alias
        ]
        if used:
            raise fail(f"{item.alias} is 1 on every kept row: leave it out", used[0])
        missing = (
            [k for k in keys if k not in names]
            if not any(isinstance(c, exp.Star) for c in inner.expressions)
            else []
        )
        if missing:
            raise fail(
                f"a deduplication's subquery outputs its keys: {', '.join(missing)}", inner, hint=_FORM
            )
        inner.set("expressions", [e for i, e in enumerate(inner.expressions) if i != index])
        outer.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        sub.meta[DEDUP_META] = keys
    return tree


def extract_deduplications(
    tree: exp.Expr, render: Callable[[exp.Expr], str]
) -> tuple[exp.Expr, list[Deduplication]]:
    """Return ``tree`` with each marked subquery replaced by a view, and the views (their Spark SQL rendered by
    ``render``, a function of a tree)."""
    marked = [s for s in tree.find_all(exp.Subquery) if DEDUP_META in s.meta]
    if not marked:
        return tree, []
    tree = tree.copy()
    out: list[Deduplication] = []
    for sub in [s for s in tree.find_all(exp.Subquery) if DEDUP_META in s.meta]:
        view = f"{VIEW_PREFIX}{len(out)}"
        out.append(Deduplication(view, render(sub.this), list(sub.meta[DEDUP_META])))
        table = exp.Table(this=exp.to_identifier(view))
        if sub.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(sub.alias)))
        sub.replace(table)
    return tree, out
