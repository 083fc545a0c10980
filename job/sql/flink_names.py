"""Flink's names for the columns a query outputs without a name.

Flink (Calcite) names an output expression that has no alias ``EXPR$i``, ``i`` its position (from 0) in the
SELECT list; Spark names it after its text (``(fare_idr + city_id)``, ``sum(fare_idr)``). A sink writes the
columns by name, so :func:`name_outputs` gives the query's rows Flink's names: each item of the query's own
SELECT (and of each branch of its UNION ALL) that is neither a column, ``*`` nor named is aliased ``EXPR$i``.
A column keeps its name (``b.order_number`` is ``order_number`` on both engines).
"""

from __future__ import annotations

from sqlglot import exp

PREFIX = "EXPR$"


def _top_level(select: exp.Select) -> bool:
    node: exp.Expr | None = select.parent
    while isinstance(node, exp.SetOperation):
        node = node.parent
    return node is None


def _unnamed(item: exp.Expr) -> bool:
    return not isinstance(item, exp.Alias | exp.Column | exp.Star | exp.Dot)


def name_outputs(tree: exp.Expr) -> exp.Expr:
    """Return ``tree`` with each unnamed expression of the query's own SELECT aliased ``EXPR$i`` (Flink's name);
    ``tree`` itself is left as it is."""
    selects = [
        s for s in tree.find_all(exp.Select) if _top_level(s) and any(_unnamed(i) for i in s.expressions)
    ]
    if not selects:
        return tree
    tree = tree.copy()
    for select in tree.find_all(exp.Select):
        if not _top_level(select):
            continue
        select.set(
            "expressions",
            [
                exp.alias_(item, exp.to_identifier(f"{PREFIX}{i}", quoted=True)) if _unnamed(item) else item
                for i, item in enumerate(select.expressions)
            ],
        )
    return tree
