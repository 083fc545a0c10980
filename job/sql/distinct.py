"""``SELECT DISTINCT`` over a windowed ``GROUP BY``, where it is exact, as a plain ``GROUP BY``.

Distinct rows of a stream never close, but distinct rows of one window do: when the rows name their window
(its start, end or time), two rows of different windows differ, so DISTINCT works within each window:

* without aggregates, ``SELECT DISTINCT k, TUMBLE_END(...) ... GROUP BY TUMBLE(...), k, j`` is ``GROUP BY
  TUMBLE(...), k``: the GROUP BY keys become the items it outputs;
* with aggregates, each group is one row already when every GROUP BY key is an output column: DISTINCT
  changes nothing and is left out.

Otherwise (no window column in the output, or aggregates of groups it does not output) it stays, and
:func:`job.sql.flink.check_unsupported` refuses it saying what to write.
"""

from __future__ import annotations

from sqlglot import exp

from job.sql.calls import fail
from job.sql.rewrite import ROWTIME_PROPERTIES, WINDOW_FUNCS, WINDOW_PROPERTIES, fname

_PROPERTIES = {*WINDOW_PROPERTIES, *ROWTIME_PROPERTIES}


def _window(select: exp.Select) -> exp.Expr | None:
    group = select.args.get("group")
    keys = list(group.expressions) if group is not None else []
    return next((k for k in keys if isinstance(k, exp.Anonymous) and fname(k) in WINDOW_FUNCS), None)


def _is_property(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and fname(node) in _PROPERTIES


def _aggregates(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.AggFunc) for n in node.walk()) or any(
        isinstance(n, exp.Anonymous) and fname(n) == "DISTINCTCOUNT" for n in node.walk()
    )


def rewrite_select_distinct(tree: exp.Expr) -> exp.Expr:
    """Return ``tree`` with each exact ``SELECT DISTINCT`` over a windowed GROUP BY as a GROUP BY (see the module).
    Raises SqlError for a DISTINCT over a windowed GROUP BY that is not exact, saying what to write."""
    if not any(
        s.args.get("distinct") is not None and _window(s) is not None for s in tree.find_all(exp.Select)
    ):
        return tree
    tree = tree.copy()
    for select in tree.find_all(exp.Select):
        window = _window(select)
        if select.args.get("distinct") is None or window is None:
            continue
        targets = [item.this if isinstance(item, exp.Alias) else item for item in select.expressions]
        if not any(_is_property(n) for t in targets for n in t.walk()):
            raise fail(
                "SELECT DISTINCT over a windowed GROUP BY needs the window among its columns (its start, end "
                "or time): rows of different windows would be compared for good",
                select.expressions[0],
                hint="add TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end (or leave out DISTINCT)",
            )
        keys = [k for k in select.args["group"].expressions if k is not window]
        if any(_aggregates(t) for t in targets):
            plain = {t.sql() for t in targets}
            missing = [k for k in keys if k.sql() not in plain]
            if missing:
                raise fail(
                    "SELECT DISTINCT over aggregates is supported when every GROUP BY key is a column of the "
                    f"output; {missing[0].sql()} is not",
                    missing[0],
                    hint="output the key, or leave it out of GROUP BY",
                )
            select.set("distinct", None)
            continue
        kept = [t.copy() for t in targets if not any(_is_property(n) for n in t.walk())]
        select.set("distinct", None)
        select.set("group", exp.Group(expressions=[window.copy(), *kept]))
    return tree
