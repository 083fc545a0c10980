"""How long a query's joins hold their output back behind the watermark: :func:`join_lag_ms`.

A stream-stream interval join keeps each row until the watermark has passed the far end of its
interval, so the windows of an aggregation over a join close that much later than the watermark
alone says. The source's pacing (:mod:`job.sources.pacing`) puts its window boundaries that much later.
"""

from __future__ import annotations

from sqlglot import exp

from job.errors import SqlError
from job.sql.rewrite import interval_ms, interval_text


def join_lag_ms(tree: exp.Expr) -> int | None:
    """Return the lag of the joins in ``tree`` in ms: 0 without a join; for interval joins
    (``ON ... x.t BETWEEN y.t [± INTERVAL] AND y.t [± INTERVAL]``) the widest interval (the low and the
    high offsets' sizes added); None when a join has no such bound (its lag is not known)."""
    lag = 0
    for join in tree.find_all(exp.Join):
        on = join.args.get("on")
        bounds = list(on.find_all(exp.Between)) if on is not None else []
        if not bounds:
            return None
        for between in bounds:
            low, high = _offset_ms(between.args.get("low")), _offset_ms(between.args.get("high"))
            if low is None or high is None:
                return None
            lag = max(lag, low + high)
    return lag


def _offset_ms(node: exp.Expr | None) -> int | None:
    """``t`` → 0, ``t + INTERVAL`` or ``t - INTERVAL`` → the interval's ms; anything else → None."""
    if isinstance(node, exp.Column):
        return 0
    if (
        isinstance(node, exp.Add | exp.Sub)
        and isinstance(node.this, exp.Column)
        and isinstance(node.expression, exp.Interval)
    ):
        try:
            return interval_ms(interval_text(node.expression))
        except SqlError:  # not a whole positive interval: the validator reports it
            return None
    return None
