"""Whether the records Spark drops as late can be counted per window, and the window's size.

Spark's streaming aggregation drops late data inside its state operator, after its partial aggregation and
the shuffle: its ``numRowsDroppedByWatermark`` counts the (key, window) rows that reach that operator, not the
records they hold (and where the source aggregated first, :mod:`job.sql.partial`, the groups it handed over).
For a query that reads one stream, filters none of its records and groups them by one TUMBLE window, Spark
drops a record exactly when its window's end is at or before the watermark for late data (the previous
micro-batch's): its records per window, observed as the stream's frame reads them
(:mod:`job.query.late`), give the records dropped.
"""

from __future__ import annotations

from sqlglot import exp


def late_window_ms(tree: exp.Expr, tables: set[str]) -> int | None:
    """The size in ms of the TUMBLE window (Spark's ``window(rowtime, '<size>')``) that ``tree``, the Spark
    query, groups one stream table of ``tables`` by, when it reads nothing else and filters none of its
    records (no WHERE, join, subquery or CTE); else None."""
    if not isinstance(tree, exp.Select) or tree.args.get("where") is not None:
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
