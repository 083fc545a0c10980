"""``daggers sql check|translate``: check and translate Dagger SQL without running it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from job.cli.common import SpecPath, StateDir, err, fail, out, quiet_spark_errors, state_dir_or_default
from job.errors import DaggerError

if TYPE_CHECKING:
    from job.query.plan import DaggerPlan

sql_app = typer.Typer(help="Check and translate Dagger SQL without running it.", no_args_is_help=True)


def _plan_or_fail(spec: Path, state_dir: Path | None) -> DaggerPlan:
    from job.query.plan import plan
    from job.spec import load_spec

    try:
        return plan(load_spec(spec), state_dir_or_default(state_dir))
    except DaggerError as exc:
        fail(exc)


@sql_app.command("check")
def sql_check(
    spec: SpecPath, state_dir: StateDir = None, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """Validate a spec and its SQL; print OK or the error with its line and column."""
    from job.errors import SqlError
    from job.spec import load_spec

    try:
        loaded = load_spec(spec)
        from job.query.plan import plan  # once the spec is read: Spark and Arrow cost a missing spec 0.5 s

        p = plan(loaded, state_dir_or_default(state_dir))
    except DaggerError as exc:
        if as_json:
            out.print_json(
                json.dumps(
                    {
                        "ok": False,
                        "title": exc.title,
                        "message": exc.message,
                        "line": getattr(exc, "line", None),
                        "col": getattr(exc, "col", None),
                    }
                )
            )
            raise typer.Exit(2) from None
        if isinstance(exc, SqlError) and exc.line:
            _show_sql_error(load_spec(spec).sql, exc)
        fail(exc)
        return
    if as_json:
        out.print_json(
            json.dumps({"ok": True, "columns": p.translation.columns, "window": p.translation.window})
        )
    else:
        out.print(f"[green]OK[/] {p.spec.name}: reads {p.translation.columns}, window {p.translation.window}")


def _show_sql_error(sql: str, exc: DaggerError) -> None:
    lines = sql.splitlines()
    line, col = getattr(exc, "line", None), getattr(exc, "col", None)
    if line and 1 <= line <= len(lines):
        err.print(f"{line:>4} | {lines[line - 1]}", highlight=False, markup=False)
        err.print(" " * (7 + (col or 1) - 1) + "^", highlight=False, markup=False)


@sql_app.command("translate")
def sql_translate(
    spec: SpecPath,
    state_dir: StateDir = None,
    explain: Annotated[bool, typer.Option(help="Also start Spark and print the plan.")] = False,
) -> None:
    """Print the Spark SQL a spec's Dagger SQL becomes (and with --explain, Spark's plan)."""
    p = _plan_or_fail(spec, state_dir)
    if out.is_terminal:
        from rich.syntax import Syntax

        out.print(Syntax(p.translation.spark_sql, "sql", word_wrap=True))
    else:  # pipes and scripts get the SQL as one plain line
        out.print(p.translation.spark_sql, markup=False, highlight=False)
    if explain:
        _explain(p)


def _explain(p: DaggerPlan) -> None:
    from job.query.plan import register_plan_functions
    from job.query.runner import register_stream_views
    from job.sources.kafka import register_source
    from job.spark.failure import explain_failure
    from job.spark.session import borrowed_session

    quiet_spark_errors()
    with borrowed_session(f"explain-{p.spec.name}", shuffle_partitions=p.spec.parallelism) as spark:
        register_source(spark)
        register_plan_functions(spark, p)
        register_stream_views(spark, p)  # the frames a running dagger reads: one definition
        try:
            spark.sql(p.translation.spark_sql).explain(mode="extended")
        except Exception as exc:  # Spark's analysis: one line, no Java stack trace
            fail(explain_failure(exc))


def register(app: typer.Typer) -> None:
    """Add the ``sql`` command group to ``app``."""
    app.add_typer(sql_app, name="sql")
