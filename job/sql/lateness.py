"""Whether the records Spark drops as late can be counted per window, and the window's size.

Spark's streaming aggregation drops late data inside its state operator, after its partial aggregation and
the shuffle: its ``numRowsDroppedByWatermark`` counts the (key, window) rows that reach that operator, not the
records they hold (and where the source aggregated first, :mod:`job.sql.partial`, the groups it handed over).
For a query that reads one stream and groups its records by one TUMBLE window, Spark drops a record its WHERE
keeps exactly when its window's end is at or before the watermark for late data (the previous micro-batch's):
its records per window, observed as the stream's frame reads them (:mod:`job.query.late`) and kept by the same
WHERE (:func:`late_where`), give the records dropped.
"""

from __future__ import annotations

from sqlglot import exp


def late_window_ms(tree: exp.Expr, tables: set[str]) -> int | None:
    """The size in ms of the TUMBLE window (Spark's ``window(rowtime, '<size>')``) that ``tree``, the Spark
    query, groups one stream table of ``tables`` by, when it reads nothing else (no join, subquery or CTE)
    and its WHERE, if any, is one :func:`late_where` can give; else None."""
    if not isinstance(tree, exp.Select):
        return None
    if tree.args.get("where") is not None and late_where(tree) is None:
        return None
    if tree.args.get("joins") or tree.args.get("with") or any(True for _ in tree.find_all(exp.Subquery)):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or source.this.name not in tables:
        return None
    group = tree.args.get("group")
    windows = [
        item
        for item in (group.expressions if group is not None else [])
        if isinstance(item, exp.Anonymous) and str(item.this).lower() == "window"
    ]
    if len(windows) != 1 or len(windows[0].expressions) != 2:
        return None  # no window, or HOP's (a record in several windows)
    column, size = windows[0].expressions
    if not (isinstance(column, exp.Column) and column.name == "rowtime" and isinstance(size, exp.Literal)):
        return None
    from job.sql.rewrite import interval_ms

    try:
        return interval_ms(size.this)
    except Exception:  # noqa: BLE001 - a size this module does not read: Spark's figure stays
        return None


def late_where(tree: exp.Expr) -> str | None:
    """The WHERE of ``tree`` (a one-stream Spark query) as Spark SQL over its stream's view, without the
    watermark barrier (:func:`job.sql.rewrite.add_watermark_barrier`) and without table names; None when it
    has none, or calls a function (a UDF would run twice a record) or reads a subquery."""
    from job.sql.rewrite import BARRIER_COLUMN, render

    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None:
        return None
    kept = [
        c
        for c in _conjuncts(where.this)
        if not any(col.name == BARRIER_COLUMN for col in c.find_all(exp.Column))
    ]
    if not kept or any(
        True for c in kept for _ in c.find_all(exp.Func, exp.Subquery, exp.Query) if not _plain(_)
    ):
        return None
    cond = kept[0]
    for more in kept[1:]:
        cond = exp.And(this=cond, expression=more)
    cond = cond.copy()
    for col in cond.find_all(exp.Column):
        col.set("table", None)
    return render(cond)


def _conjuncts(cond: exp.Expr) -> list[exp.Expr]:
    if isinstance(cond, exp.And):
        return _conjuncts(cond.this) + _conjuncts(cond.expression)
    if isinstance(cond, exp.Paren):
        return _conjuncts(cond.this) if isinstance(cond.this, exp.And) else [cond]
    return [cond]


#: Functions a WHERE may call and still be observed: comparisons and logic (cheap, and no UDF).
_PLAIN = (
    exp.Binary,
    exp.Not,
    exp.Paren,
    exp.In,
    exp.Between,
    exp.Is,
    exp.Like,
    exp.Cast,
    exp.Neg,
    exp.Coalesce,
)


def _plain(node: exp.Expr) -> bool:
    return isinstance(node, _PLAIN) and not isinstance(node, (exp.Anonymous, exp.Query, exp.Subquery))
