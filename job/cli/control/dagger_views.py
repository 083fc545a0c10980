"""What a person reads of a dagger: its table row, its progress, its lookups."""

from __future__ import annotations

from typing import Any

from rich.table import Column, Table

from job.cli.control.reply import span
from job.common.words import counted


def figure_text(figure: dict[str, Any] | None, fmt: str = "{:.0f}") -> str:
    """Return a figure of the health model as a person reads it: ``967``, ``967 (4m old)``; ``-`` for none."""
    if not figure:
        return "-"
    text = fmt.format(figure["value"])
    return text if figure.get("fresh") else f"{text} ({span(figure['age_s'])} old)"


def dagger_table(rows: list[Any]) -> Table:
    """Return the table of daggers that ``dagger list`` and ``dagger show`` print."""
    # the dagger and its cluster are never cut: at a narrow terminal the figures give way
    t = Table(
        Column("dagger", no_wrap=True),
        Column("cluster", no_wrap=True),
        "v",
        "desired",
        "actual",
        Column("health", no_wrap=True),
        Column("rows/s", justify="right"),
        Column("lag", justify="right"),
        Column("batch ms", justify="right"),
        Column("restarts", justify="right"),
    )
    for d in rows:
        h = d.health
        t.add_row(
            d.ref,
            d.cluster,
            str(d.current_version),
            d.desired_state,
            d.actual_state,
            d.state,
            figure_text(h.get("rows_per_s")),
            figure_text(h.get("lag")),
            figure_text(h.get("batch_ms")),
            str(d.restarts),
        )
    return t


def _ago(seconds: float) -> str:
    """``45 s``, ``6 min``, ``3 h``, ``2 d``: how long ago, for a figure's age."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 1.5 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _when(d: Any, figure: dict[str, Any]) -> str:
    """Return when a figure of the health model holds: "now" only for a fresh figure of a live dagger, else its
    age ("6 min ago (stale)")."""
    age, fresh = float(figure.get("age_s") or 0.0), bool(figure.get("fresh"))
    if fresh and d.actual_state in ("starting", "running"):
        return "now"
    return f"{_ago(age)} ago" + ("" if fresh else " (stale)")


def progress_lines(d: Any, now: float | None = None) -> list[str]:
    """Return what a person reads of a dagger's last progress report (``--json`` has all of it). Its rows/s,
    lag and batch time are the health model's figures, as the console and /metrics show them: none (``-``) for
    a state that shows none (a crash-looping dagger printed its last rate and lag), and a figure says "now" only
    when it is fresh, else how old it is. A watermark is shown only when the query has one."""
    import time

    # imported here: the health model's pydantic models cost every ``daggers`` command a tenth of a second
    from job.control.health_model import CRASH_LOOPING, FAILED, STARTING, STOPPED, UNKNOWN, event_watermark

    #: the states the health model shows no figure of (rows/s, lag, batch time), rather than their last values
    no_figures = (STARTING, CRASH_LOOPING, FAILED, STOPPED, UNKNOWN)
    p = d.progress
    if not p:
        return []
    now = time.time() if now is None else now
    h = d.health or {}
    rate_fig, lag_fig, batch_fig = h.get("rows_per_s"), h.get("lag"), h.get("batch_ms")
    rate = f"{float(rate_fig['value']):,.0f} rows/s {_when(d, rate_fig)}" if rate_fig else "rows/s -"
    lag = "; lag -"
    if lag_fig:
        lag_when = _when(d, lag_fig)
        lag = f"; lag {counted(int(lag_fig['value']), 'record', fmt=',')}" + (
            "" if lag_when == "now" else f" {lag_when}"
        )
    state = str(h.get("state") or UNKNOWN)
    lines = [
        f"read {counted(p.get('input_rows', 0), 'row', fmt=',')} in {counted(p.get('batches', 0), 'batch', fmt=',')} "
        f"({'up to ' if p.get('late_before_filter') else ''}"
        f"{counted(p.get('late_rows_dropped', 0), 'late row', fmt=',')} dropped"
        f"{' (of its stream, before its WHERE)' if p.get('late_before_filter') else ''}, "
        f"{counted(p.get('bad_records', 0), 'bad record', fmt=',')}); {rate}{lag}"
        + (
            f" ({'an' if state[0] in 'aeiou' else 'a'} {state} dagger shows no figure)"
            if state in no_figures
            else ""
        )
    ]
    if batch_fig:
        phases = sorted(p.get("batch_phases_ms", {}).items(), key=lambda kv: -kv[1])
        slowest = ", ".join(f"{k} {v:,}" for k, v in [kv for kv in phases if kv[0] != "triggerExecution"][:4])
        batch_when = _when(d, batch_fig)
        lines.append(
            f"last batch {int(batch_fig['value']):,} ms"
            + ("" if batch_when == "now" else f", {batch_when}")
            + (f" ({slowest})" if slowest else "")
        )
    if watermark := event_watermark(p.get("watermark")):
        lines.append(f"watermark {watermark}")
    for name, sink in (p.get("sinks") or {}).items():
        windows = (
            f"; windows {sink['first_window']} to {sink['last_window']}" if sink.get("first_window") else ""
        )
        error = f"; last error: {sink['last_error']}" if sink.get("last_error") else ""
        if isinstance(retrying := sink.get("retrying"), dict):  # a write being retried (job.sinks.base)
            error += (
                f"; retrying: attempt {retrying.get('attempt')}/{retrying.get('of')}, next in "
                f"{_ago(max(0.0, float(retrying.get('next_at') or now) - now))} ({retrying.get('error')})"
            )
        lines.append(
            f"sink {name}: {counted(sink.get('rows_written', 0), 'row', fmt=',')} in "
            f"{counted(sink.get('writes', 0), 'write', fmt=',')} ({counted(sink.get('retries', 0), 'retry', fmt=',')}, "
            f"{counted(sink.get('failures', 0), 'failure', fmt=',')}) to "
            f"{sink.get('target') or str(sink.get('sink_type') or '?') + ' (no write yet)'}{windows}{error}"
        )
    lines += lookup_lines(p.get("lookups") or {})
    return lines


def lookup_lines(lookups: dict[str, dict[str, Any]]) -> list[str]:
    """Return one line per lookup of a progress report: rows, keys and the cache's hit rate, requests,
    misses, errors (rows written with NULLs) and the mean latency per batch."""
    lines = []
    for name, m in lookups.items():
        error = f"; last error: {m['last_error']}" if m.get("last_error") else ""
        lines.append(
            f"lookup {name}: {m.get('rows', 0):,} rows, {m.get('keys', 0):,} keys "
            f"({float(m.get('hit_rate') or 0):.0%} from the cache), {m.get('requests', 0):,} requests, "
            f"{m.get('not_found', 0):,} not found, {m.get('errors', 0):,} errors "
            f"({m.get('rows_with_errors', 0):,} rows with NULLs), {float(m.get('mean_ms') or 0):,.1f} ms "
            f"a batch to {m.get('target') or m.get('lookup_type', '?')}{error}"
        )
    return lines
