"""``daggers``: the one command line for every job a user does.

Errors that Daggers knows (bad spec, bad SQL, unreachable services…) print as a short
``title: message`` with the line, column or field to fix, and exit with status 2; never a traceback.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.syntax import Syntax

from job.errors import DaggerError

app = typer.Typer(name="daggers", help="Real-time aggregation over Kafka protobuf streams with Dagger SQL.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
sql_app = typer.Typer(help="Check and translate Dagger SQL without running it.", no_args_is_help=True)
protos_app = typer.Typer(help="The protobuf schemas in protos/.", no_args_is_help=True)
app.add_typer(sql_app, name="sql")
app.add_typer(protos_app, name="protos")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

StateDir = Annotated[Path | None, typer.Option("--state-dir", help="Stack state folder ($DAGGERS_HOME or ./.daggers).")]
SpecPath = Annotated[Path, typer.Argument(help="The dagger spec (YAML).", exists=False)]


def fail(exc: DaggerError) -> None:
    """Print a known error for a person and exit 2."""
    err.print(f"[bold red]{exc.title}:[/] {exc.message}", highlight=False, markup=True)
    if exc.hint:
        err.print(f"[yellow]hint:[/] {exc.hint}", highlight=False)
    raise typer.Exit(2)


def _state_dir(state_dir: Path | None) -> Path:
    from job.stack.local import default_state_dir

    return state_dir or default_state_dir()


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# ---- run ---------------------------------------------------------------------------------------

@app.command()
def run(
    spec: SpecPath,
    once: Annotated[bool, typer.Option(help="Process what is in the topics now, then stop.")] = False,
    max_seconds: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    master: Annotated[str, typer.Option(help="Spark master: local[*] or spark://host:port.")] = "local[*]",
    state_dir: StateDir = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run a dagger in the foreground until Ctrl-C; the next run resumes from its checkpoint."""
    from job.plan import plan
    from job.runner import run_foreground
    from job.spec import load_spec

    _setup_logging(verbose)
    try:
        p = plan(load_spec(spec), _state_dir(state_dir))
        out.print(f"[bold]dagger[/] {p.spec.name}: checkpoint {p.checkpoint}")
        progress = run_foreground(p, master=master, available_now=once, max_seconds=max_seconds)
    except DaggerError as exc:
        fail(exc)
        return
    out.print(f"stopped after {progress.batches} batches: {progress.input_rows} rows read, "
              f"{progress.late_rows_dropped} late rows dropped, {progress.bad_records} bad records skipped")


# ---- sql ---------------------------------------------------------------------------------------

def _plan_or_fail(spec: Path, state_dir: Path | None):  # type: ignore[no-untyped-def]
    from job.plan import plan
    from job.spec import load_spec

    try:
        return plan(load_spec(spec), _state_dir(state_dir))
    except DaggerError as exc:
        fail(exc)


@sql_app.command("check")
def sql_check(spec: SpecPath, state_dir: StateDir = None,
              as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Validate a spec and its SQL; print OK or the error with its line and column."""
    from job.errors import SqlError
    from job.plan import plan
    from job.spec import load_spec

    try:
        p = plan(load_spec(spec), _state_dir(state_dir))
    except DaggerError as exc:
        if as_json:
            out.print_json(json.dumps({"ok": False, "title": exc.title, "message": exc.message,
                                       "line": getattr(exc, "line", None), "col": getattr(exc, "col", None)}))
            raise typer.Exit(2) from None
        if isinstance(exc, SqlError) and exc.line:
            _show_sql_error(load_spec(spec).sql, exc)
        fail(exc)
        return
    if as_json:
        out.print_json(json.dumps({"ok": True, "columns": p.translation.columns,
                                   "window": p.translation.window}))
    else:
        out.print(f"[green]OK[/] {p.spec.name}: reads {p.translation.columns}, window {p.translation.window}")


def _show_sql_error(sql: str, exc: DaggerError) -> None:
    lines = sql.splitlines()
    line, col = getattr(exc, "line", None), getattr(exc, "col", None)
    if line and 1 <= line <= len(lines):
        err.print(f"{line:>4} | {lines[line - 1]}", highlight=False, markup=False)
        err.print(" " * (7 + (col or 1) - 1) + "^", highlight=False, markup=False)


@sql_app.command("translate")
def sql_translate(spec: SpecPath, state_dir: StateDir = None,
                  explain: Annotated[bool, typer.Option(help="Also start Spark and print the plan.")] = False) -> None:
    """Print the Spark SQL a spec's Dagger SQL becomes (and with --explain, Spark's plan)."""
    p = _plan_or_fail(spec, state_dir)
    if out.is_terminal:
        out.print(Syntax(p.translation.spark_sql, "sql", word_wrap=True))
    else:  # pipes and scripts get the SQL as one plain line
        out.print(p.translation.spark_sql, markup=False, highlight=False)
    if explain:
        _explain(p)


def _explain(p) -> None:  # type: ignore[no-untyped-def]
    from job.functions.spark_udfs import register_plan_functions
    from job.sources.kafka import SOURCE_NAME, register_source, source_options
    from job.spark_session import build_session, running_session

    running = running_session()
    spark = running or build_session(f"explain-{p.spec.name}", shuffle_partitions=p.spec.parallelism)
    try:
        register_source(spark)
        register_plan_functions(spark, p)
        from pyspark.sql import functions as F

        from job.sql.rewrite import BARRIER_COLUMN

        for s in p.streams:
            df = spark.readStream.format(SOURCE_NAME).options(**source_options(s.source)).load()
            ts = F.col(s.timestamp_field)
            if s.timestamp_kind == "int64":
                ts = F.timestamp_millis(ts)
            (df.withColumn("rowtime", ts)
             .withWatermark("rowtime", f"{p.spec.watermark_delay_ms} milliseconds")
             .withColumn(BARRIER_COLUMN, F.rand())
             .createOrReplaceTempView(s.table))
        spark.sql(p.translation.spark_sql).explain(mode="extended")
    finally:
        if running is None:
            spark.stop()


# ---- protos ------------------------------------------------------------------------------------

@protos_app.command("list")
def protos_list() -> None:
    """List the message classes in protos/ with their fields."""
    from job.schema import default_registry

    try:
        reg = default_registry()
    except DaggerError as exc:
        fail(exc)
        return
    for name in reg.message_names():
        fields = ", ".join(f"{f.name}:{f.kind}{'[]' if f.repeated else ''}" for f in reg.fields(name).values())
        out.print(f"[bold]{name}[/]  {fields}")


@protos_app.command("build")
def protos_build(out_file: Annotated[Path | None, typer.Option("--out", help="Also write the compiled schema "
                                                               "version (a FileDescriptorSet) here.")] = None,
                 root: Annotated[Path | None, typer.Option(
                     "--root", help="A team's own folder of .proto files instead of protos/ (no *_pb2.py are "
                                    "generated; serve the --out file for schema_url:).")] = None) -> None:
    """Compile protos/ (a versioned descriptor set and *_pb2.py modules) with grpcio-tools."""
    from job.schema.compile import PROTO_ROOT, compile_descriptor_set, generate_python, source_hash
    from job.schema.team import CACHE_DIR

    try:
        if root is not None:
            data = compile_descriptor_set(root, CACHE_DIR)
        else:
            data = compile_descriptor_set()
            for path in generate_python():
                out.print(f"generated {path}")
    except DaggerError as exc:
        fail(exc)
        return
    out.print(f"schema version {source_hash(root or PROTO_ROOT)} ({len(data):,} bytes)")
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_bytes(data)
        out.print(f"wrote {out_file} (use it as schema_file: in a spec, or serve it for schema_url:)")


# ---- demo --------------------------------------------------------------------------------------

@app.command()
def demo(
    broker: Annotated[str, typer.Option(help="tansu or noida.")] = "tansu",
    events: Annotated[int, typer.Option(help="Events per stream.")] = 200_000,
    minutes: Annotated[int, typer.Option(help="Minutes of event time the events cover.")] = 5,
    state_dir: StateDir = None,
) -> None:
    """Start the local stack, produce realistic events, run the two seed daggers and show their windows."""
    from job.demo import run_demo

    _setup_logging(False)
    try:
        run_demo(_state_dir(state_dir), broker=broker, events=events, minutes=minutes, console=out)
    except DaggerError as exc:
        fail(exc)


def _register_commands() -> None:
    from job.cli_alerts import register as register_alerts
    from job.cli_atlas import register as register_atlas
    from job.cli_chaos import register as register_chaos
    from job.cli_control import register as register_control
    from job.cli_produce import register as register_produce
    from job.cli_stack import register as register_stack

    register_stack(app)
    register_produce(app)
    register_chaos(app)
    register_alerts(app)
    register_atlas(app)
    register_control(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except DaggerError as exc:  # pragma: no cover - commands catch their own
        err.print(f"[bold red]{exc.title}:[/] {exc.message}")
        sys.exit(2)


if __name__ == "__main__":
    main()
