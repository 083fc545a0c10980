"""Translate a Dagger SQL query into Spark SQL for a given set of stream tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from job.sql import validate
from job.sql.catalog import DaggerFunction
from job.sql.dedup import Deduplication, extract_deduplications, mark_deduplications
from job.sql.distinct import rewrite_select_distinct
from job.sql.flink import check_unsupported, rewrite_comma_joins
from job.sql.flink_names import name_outputs
from job.sql.join_lag import join_lag_ms
from job.sql.lateness import late_where, late_window_ms
from job.sql.numeric_keys import NumericKey, push_down_numeric_keys
from job.sql.parse import parse
from job.sql.partial import SourcePartial, source_partial
from job.sql.pushdown import DerivedColumn, batch_order, push_down_s2
from job.sql.rewrite import (
    add_watermark_barrier,
    fname,
    put_window_keys_last,
    render,
    rewrite_distinct_count_bytes,
    to_spark,
    window_args,
)
from job.sql.window_tvf import cumulate_windows, rewrite_window_tvfs


@dataclass(frozen=True)
class Translation:
    """The result of translating one query."""

    dagger_sql: str
    spark_sql: str
    columns: dict[str, list[str]]  # stream table -> the columns the query reads, sorted
    aggregates: bool  # whether results are emitted per window (append after the watermark)
    window: tuple[str, str | None] | None = None  # (size, slide) of the outermost window
    notes: list[str] = field(default_factory=list)
    derived: dict[str, list[DerivedColumn | NumericKey]] = field(
        default_factory=dict
    )  # table -> columns its source computes
    # table -> the columns the query reads only through its derived columns (the source decodes them
    # for those and need not hand them to Spark)
    derived_only: dict[str, list[str]] = field(default_factory=dict)
    # table -> the column its source sorts each batch by (job.sql.pushdown.batch_order)
    batch_order: dict[str, str] = field(default_factory=dict)
    # how long the joins hold output back behind the watermark, ms (0: no join; None: not known; job.sql.join_lag)
    join_lag_ms: int | None = 0
    # the query's output column names, in order (None: not known before Spark runs; job.sql.scope.Resolution)
    output_columns: list[str] | None = None
    # views the engine registers before the query: a subquery's rows without duplicate keys (job.sql.dedup)
    dedups: list[Deduplication] = field(default_factory=list)
    # table -> what its source aggregates before Spark does (job.sql.partial)
    partial: dict[str, SourcePartial] = field(default_factory=dict)
    # the TUMBLE window's size when the records Spark drops as late can be counted per window (job.sql.lateness)
    late_window_ms: int | None = None
    # the WHERE that keeps the records counted per window then, over the stream's view (job.sql.lateness)
    late_where: str | None = None


def translate(
    sql: str,
    tables: Mapping[str, Iterable[str] | Mapping[str, str | None]],
    udfs: Mapping[str, DaggerFunction] | None = None,
    *,
    s2_int_keys: bool = True,
    window_keys_last: bool = True,
    distinct_bytes: bool = True,
    partial: bool = False,
    partial_aggregates: bool = True,
    numeric_keys: bool = True,
) -> Translation:
    """Return the Spark SQL of ``sql`` over ``tables`` (stream table → its column names, or → column →
    Spark type text, which lets nested fields and UNNEST be checked and UNNEST pick its generator).

    ``udfs`` are the dagger's own functions (lower-case name → description, see
    :func:`job.functions.user.catalog_entries`); they are called as they are. ``s2_int_keys``: see
    :func:`job.sql.pushdown.push_down_s2`. ``window_keys_last``: see :func:`job.sql.rewrite.put_window_keys_last`.
    ``distinct_bytes``: see :func:`job.sql.rewrite.rewrite_distinct_count_bytes`. ``partial`` (with
    ``distinct_bytes``): let the source aggregate first where it can (:mod:`job.sql.partial`);
    ``partial_aggregates`` False: only where every aggregate is a DistinctCount. ``numeric_keys``: the source
    computes a numeric GROUP BY key (:mod:`job.sql.numeric_keys`).

    Raises SqlError with line and column for a query that does not parse, reads an unknown table,
    column or function, calls a function with the wrong arguments, or aggregates a stream without
    a window.
    """
    tree = rewrite_select_distinct(mark_deduplications(rewrite_window_tvfs(name_outputs(parse(sql)))))
    check_unsupported(tree)
    validate.check_functions(tree, udfs)
    validate.check_tables(tree, tables)
    used = validate.check_columns(tree, tables)
    validate.check_unique_output(tree, tables)
    validate.check_windows(tree)
    tree = rewrite_comma_joins(tree)
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    window = validate.group_window(select) if select is not None else None
    pushed, s2_cells = push_down_s2(tree, set(tables), int_keys=s2_int_keys)
    derived: dict[str, list[DerivedColumn | NumericKey]] = {t: list(c) for t, c in s2_cells.items()}
    if numeric_keys:
        pushed, keys = push_down_numeric_keys(pushed, set(tables), lambda key: render(to_spark(key, udfs)))
        for table, cols in keys.items():
            derived.setdefault(table, []).extend(cols)
    spark = add_watermark_barrier(cumulate_windows(to_spark(pushed, udfs)), set(tables))
    if distinct_bytes:
        spark = rewrite_distinct_count_bytes(spark)
    if window_keys_last:
        spark = put_window_keys_last(spark)
    validate.check_spark_functions(spark)
    spark, dedups = extract_deduplications(spark, render)
    columns = {t: set(cols) | {c.name for c in derived.get(t, [])} for t, cols in tables.items()}
    partials: dict[str, SourcePartial] = {}
    first = (
        partial
        and distinct_bytes
        and not dedups
        and source_partial(
            spark, tables, {t: [c.name for c in cols] for t, cols in derived.items()}, partial_aggregates
        )
    )
    if first:
        spark, table, what = first
        partials[table] = what
    return Translation(
        dagger_sql=sql,
        spark_sql=render(spark),
        columns={t: sorted(c) for t, c in used.items()},
        aggregates=any(validate.has_aggregate(s) for s in tree.find_all(exp.Select)),
        join_lag_ms=join_lag_ms(tree),
        window=window_args(window)[1:] if window is not None and fname(window) != "SESSION" else None,
        derived=derived,
        derived_only=_derived_only(pushed, derived),
        batch_order={} if partials else batch_order(spark, columns),
        output_columns=validate.output_columns(tree, tables),
        dedups=dedups,
        partial=partials,
        late_window_ms=None if dedups else late_window_ms(spark, set(tables)),
        late_where=None if dedups else late_where(spark),
    )


def _derived_only(
    pushed: exp.Expr, derived: dict[str, list[DerivedColumn | NumericKey]]
) -> dict[str, list[str]]:
    """Return, per table, the derived columns' inputs that the rewritten query no longer names (none when
    it selects ``*``: every column is read then)."""
    if any(True for _ in pushed.find_all(exp.Star)):
        return {}
    named = {c.name for c in pushed.find_all(exp.Column)}
    out = {t: sorted({n for c in cols for n in c.inputs} - named) for t, cols in derived.items()}
    return {t: cols for t, cols in out.items() if cols}
