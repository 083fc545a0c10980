"""``daggers dagger show`` never prints an old figure as "now", nor a figure the health model does not show. It
printed "206 rows/s now; lag 11,757" of a failed dagger whose last batch was 6 minutes old, and "0 rows/s 30 s ago;
lag 4,198 records 9 s ago" of a crash-looping one; now its rows/s, lag and batch time are the health model's figures
(``fresh``, ``age_s``), as the console and /metrics show them: none for a state that shows none."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

from sqlalchemy import select
from typer.testing import CliRunner

from job.cli.control.dagger_views import progress_lines
from job.control import ControlPlane, Registry
from job.control.models import Cluster, DaggerStatus
from tests.job.cli.test_cli_views import _dagger
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_control_cli import cli

READ = "read 10,000 rows in 2 batches (3 late rows dropped, 1 bad record); "
NOW = 1_800_000_000.0


def _first(view) -> str:  # type: ignore[no-untyped-def]
    return progress_lines(view, now=NOW)[0].removeprefix(READ)


def test_a_stale_figure_of_the_health_model_says_its_age() -> None:
    stale = {
        "rows_per_s": {"value": 206.0, "at": NOW - 360, "age_s": 360.0, "fresh": False},
        "lag": {"value": 11757.0, "at": NOW - 360, "age_s": 360.0, "fresh": False},
    }
    view = replace(_dagger(), health={**_dagger().health, **stale}, lag=11757)
    assert _first(view) == "206 rows/s 6 min ago (stale); lag 11,757 records 6 min ago (stale)"
    assert _first(_dagger()) == "1,234 rows/s now; lag 17 records"  # fresh, running: now


def test_without_a_figure_of_the_health_model_none_is_shown() -> None:
    """Show follows the health model: where it gives no figure (a failed, crash-looping, stopped or unknown
    dagger; a running one before two samples), show prints none, not the last value it can find."""
    base = replace(
        _dagger(), health={"state": "failed", "reason": "gave up"}, actual_state="failed", lag=11757
    )
    old = replace(
        base,
        progress={**base.progress, "input_rows_per_s": 206.4, "batch_at": NOW - 360, "updated_at": NOW - 300},
        lag_at=NOW - 400,
    )
    assert progress_lines(old, now=NOW)[:2] == [
        f"{READ}rows/s -; lag - (a failed dagger shows no figure)",
        "watermark 2026-11-29T07:55:48.794Z",  # no batch time either: the model gives none
    ]
    starting = replace(old, health={"state": "running", "reason": "reading"}, actual_state="running")
    assert _first(starting) == "rows/s -; lag -"


def _show(registry: Registry, name: str) -> str:
    result = CliRunner().invoke(
        cli(),
        ["dagger", "show", name, "--registry", registry.url],
        env={"DAGGERS_USER": "alice", "COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    return str(result.output)


def test_dagger_show_of_a_failed_dagger_prints_no_figure(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(registry)
        view = ControlPlane(registry, "alice").create("a-jkt", bookings_spec("gave-up"), deploy=True)
        six_min_ago = time.time() - 360
        with registry.session() as s:
            s.scalars(select(Cluster).where(Cluster.name == "a-jkt")).one().controller_heartbeat = time.time()
            st = s.get(DaggerStatus, view.id)
            assert st is not None
            st.actual_state, st.restarts, st.last_error = (
                "failed",
                6,
                "Sink error: InfluxDB refused the write",
            )
            st.progress = {
                "batches": 40,
                "input_rows": 91_000,
                "input_rows_per_s": 206.0,
                "batch_at": six_min_ago,
                "updated_at": six_min_ago,
            }
            st.lag, st.lag_at = 11_757, six_min_ago
        output = _show(registry, "gave-up")
        line = next(x for x in output.splitlines() if x.startswith("read 91,000 rows"))
        assert line.endswith("; rows/s -; lag - (a failed dagger shows no figure)"), line
        assert not re.search(r"\bnow\b", output)
    finally:
        registry.close()


def test_dagger_show_of_a_crash_looping_dagger_prints_no_figure_and_no_epoch_watermark(
    tmp_path: Path,
) -> None:
    """It printed "0 rows/s 30 s ago; lag 4,198 records 9 s ago" of a crash-looping dagger, and the watermark
    "1970-01-01T00:00:00.000Z" that Spark reports for a query without event time. The console's row and
    /metrics show no figure of it: neither does show."""
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(registry)
        view = ControlPlane(registry, "alice").create("a-jkt", bookings_spec("loops"), deploy=True)
        now = time.time()
        with registry.session() as s:
            s.scalars(select(Cluster).where(Cluster.name == "a-jkt")).one().controller_heartbeat = time.time()
            st = s.get(DaggerStatus, view.id)
            assert st is not None
            st.actual_state, st.restarts, st.next_restart_at = "crashed", 3, now + 5
            st.last_error = (
                "Dagger error: the streaming query failed: ZeroDivisionError: float division by zero"
            )
            st.progress = {
                "batches": 7,
                "input_rows": 4_000,
                "input_rows_per_s": 0.0,
                "batch_duration_ms": 310,
                "watermark": "1970-01-01T00:00:00.000Z",
                "batch_at": now - 30,
                "updated_at": now - 9,
            }
            st.lag, st.lag_at = 4_198, now - 9
        shown = ControlPlane(registry, "alice").dagger("loops")
        assert shown.state == "crash-looping"
        assert (shown.health.get("rows_per_s"), shown.health.get("lag"), shown.health.get("batch_ms")) == (
            None,
            None,
            None,
        )
        lines = _show(registry, "loops").splitlines()
        line = next(x for x in lines if x.startswith("read 4,000 rows"))
        assert line == (
            "read 4,000 rows in 7 batches (0 late rows dropped, 0 bad records); rows/s -; lag - "
            "(a crash-looping dagger shows no figure)"
        ), line
        assert not any(x.startswith(("watermark", "last batch")) for x in lines), lines
        row = next(x for x in lines if "team-a/loops" in x)
        assert [c.strip() for c in row.split("│")[7:10]] == ["-", "-", "-"], row  # the table's figures agree
    finally:
        registry.close()


def test_a_query_without_event_time_shows_no_watermark() -> None:
    """Spark reports the epoch as the watermark of a query without one (a pass-through, no window)."""
    epoch = replace(_dagger(), progress={**_dagger().progress, "watermark": "1970-01-01T00:00:00.000Z"})
    assert not any(line.startswith("watermark") for line in progress_lines(epoch, now=NOW))
    assert "watermark 2026-11-29T07:55:48.794Z" in progress_lines(_dagger(), now=NOW)


def test_show_says_a_sink_is_retrying() -> None:
    sinks = {
        "influx": {
            **_dagger().progress["sinks"]["influx"],
            "retrying": {
                "attempt": 7,
                "of": 15,
                "next_at": NOW + 12.3,
                "since": NOW - 200,
                "error": "cannot reach http://i:8086",
            },
        }
    }
    view = replace(_dagger(), progress={**_dagger().progress, "sinks": sinks})
    assert progress_lines(view, now=NOW)[3] == (
        "sink influx: 176 rows in 2 writes (1 retry, 0 failures) to measurement m in database d; windows 07:55 to "
        "07:57; retrying: attempt 7/15, next in 12 s (cannot reach http://i:8086)"
    )
