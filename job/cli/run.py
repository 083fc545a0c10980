"""``daggers run`` (one dagger in the foreground) and ``daggers demo`` (the whole path on the local stack)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from job.cli.common import (
    EXIT_INTERRUPTED,
    SpecPath,
    StateDir,
    fail,
    out,
    setup_logging,
    state_dir_or_default,
)
from job.common.words import counted
from job.errors import DaggerError


def run(
    spec: SpecPath,
    once: Annotated[bool, typer.Option(help="Process what is in the topics now, then stop.")] = False,
    max_seconds: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    master: Annotated[str, typer.Option(help="Spark master: local[*] or spark://host:port.")] = "local[*]",
    state_dir: StateDir = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run a dagger in the foreground until Ctrl-C; the next run resumes from its checkpoint."""
    from job.spec import load_spec

    loaded = None
    try:
        loaded = load_spec(spec)  # logs nothing
        # once the spec is read: Spark (and quieting it), Arrow and the Kafka client cost a missing spec 0.5 s
        setup_logging(verbose)
        from job.query.plan import plan
        from job.query.runner import run_foreground
        from job.shared import forkserver

        p = plan(loaded, state_dir_or_default(state_dir))
        out.print(f"[bold]dagger[/] {p.spec.name}: checkpoint {p.checkpoint}")
        last_batch_before = _last_batch(p.checkpoint / "status.json")
        forkserver.start_if_local(master)
        progress = run_foreground(p, master=master, available_now=once, max_seconds=max_seconds)
    except DaggerError as exc:
        if loaded is not None:  # an error about a value from the environment names its variable
            exc.message = loaded.name_variables(exc.message)
        fail(exc)
    except KeyboardInterrupt:  # Ctrl-C while waiting for a broker or Spark, or a second Ctrl-C while stopping
        out.print("interrupted: stopped at once (the next run resumes from the checkpoint)")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    out.print(
        f"stopped after {counted(progress.batches, 'batch')}: {counted(progress.input_rows, 'row', fmt=',')} read, "
        f"{counted(progress.late_rows_dropped, 'late row', fmt=',')} dropped, "
        f"{counted(progress.bad_records, 'bad record', fmt=',')} skipped"
    )
    if progress.last_batch_id == last_batch_before:  # the sink counters are an earlier run's
        out.print("no micro-batch ran: nothing written", highlight=False)
        return
    for line in written_summary(progress.sinks):
        out.print(line, highlight=False, markup=False)
    from job.cli.control.dagger_views import lookup_lines

    for line in lookup_lines(progress.lookups):
        out.print(line, highlight=False, markup=False)


def _last_batch(status: Path) -> int:
    try:
        return int(json.loads(status.read_text()).get("last_batch_id", -1))
    except (OSError, ValueError, TypeError):
        return -1


def written_summary(sinks: dict[str, dict[str, Any]]) -> list[str]:
    """One line per sink: how many rows it wrote, where (measurement, topic or table), and the range of the
    windows (their end times) written; or why nothing was written."""
    lines = []
    for name, m in sinks.items():
        rows, target = int(m.get("rows_written") or 0), m.get("target") or name
        if not rows:
            lines.append(
                f"{name}: wrote nothing to {target} (no window closed yet: a window is written once "
                "the watermark passes its end)"
            )
            continue
        first, last = (_clock(m.get(k)) for k in ("first_window", "last_window"))
        span = f"windows ending {first}" + (f" to {last}" if last != first else "") if first else "no windows"
        lines.append(f"{name}: wrote {counted(rows, 'row', fmt=',')} to {target}, {span}")
    return lines


def _clock(iso: str | None) -> str:
    """``2026-03-02T09:01:00+00:00`` -> ``2026-03-02 09:01:00 UTC``."""
    if not iso:
        return ""
    return iso.replace("T", " ").removesuffix("+00:00") + " UTC"


def demo(
    broker: Annotated[str, typer.Option(help="tansu or noida.")] = "tansu",
    events: Annotated[int, typer.Option(help="Events per stream.")] = 200_000,
    minutes: Annotated[int, typer.Option(help="Minutes of event time the events cover.")] = 5,
    state_dir: StateDir = None,
) -> None:
    """Start the local stack, produce realistic events, run the two seed daggers and show their windows."""
    from job.cli.demo import run_demo

    setup_logging(False)
    try:
        run_demo(state_dir_or_default(state_dir), broker=broker, events=events, minutes=minutes, console=out)
    except DaggerError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``demo`` to ``app``."""
    app.command("run")(run)
    app.command("demo")(demo)
