"""Issue 51: ``daggers dagger show`` never prints an old figure as "now". It printed "206 rows/s now; lag 11,757" of a
failed dagger whose last batch was 6 minutes old; now a figure says its age when it is not fresh, from the health
model's figure (``fresh``, ``age_s``) or, when the model shows none (a failed dagger), from when it was measured."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from job.cli.control.dagger_views import progress_lines
from job.control import ControlPlane, Registry
from job.control.models import DaggerStatus
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


def test_without_a_figure_the_age_comes_from_when_it_was_measured() -> None:
    base = replace(
        _dagger(), health={"state": "failed", "reason": "gave up"}, actual_state="failed", lag=11757
    )
    old = replace(
        base,
        progress={**base.progress, "input_rows_per_s": 206.4, "batch_at": NOW - 360, "updated_at": NOW - 300},
        lag_at=NOW - 400,
    )
    assert _first(old) == "206 rows/s 6 min ago (stale); lag 11,757 records 7 min ago (stale)"
    recent = replace(old, progress={**old.progress, "batch_at": NOW - 12}, lag_at=NOW - 12)
    assert (
        _first(recent) == "206 rows/s 12 s ago; lag 11,757 records 12 s ago"
    )  # fresh, but it is not running
    running = replace(recent, actual_state="running")
    assert _first(running) == "206 rows/s now; lag 11,757 records"
    unknown = replace(
        old,
        progress={k: v for k, v in old.progress.items() if k not in ("batch_at", "updated_at")},
        lag_at=None,
    )
    assert _first(unknown) == (
        "206 rows/s at an unknown time (stale); lag 11,757 records at an unknown time (stale)"
    )
    days = replace(old, progress={**old.progress, "batch_at": NOW - 3 * 86400}, lag_at=NOW - 5400)
    assert _first(days) == "206 rows/s 3 d ago (stale); lag 11,757 records 2 h ago (stale)"


def test_dagger_show_of_a_failed_dagger_prints_its_figures_age(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(registry)
        view = ControlPlane(registry, "alice").create("a-jkt", bookings_spec("gave-up"), deploy=True)
        six_min_ago = time.time() - 360
        with registry.session() as s:
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
        result = CliRunner().invoke(
            cli(),
            ["dagger", "show", "gave-up", "--registry", registry.url],
            env={"DAGGERS_USER": "alice", "COLUMNS": "200"},
        )
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if x.startswith("read 91,000 rows"))
        assert line.endswith("; 206 rows/s 6 min ago (stale); lag 11,757 records 6 min ago (stale)"), line
        assert not re.search(r"\bnow\b", result.output)
    finally:
        registry.close()


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
