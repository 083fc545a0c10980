"""What ``daggers dagger list`` and ``show`` print. Tables as a person and a script read them: to a pipe or a
file, whole (rich squeezed them into 80 columns and ``daggers dagger list | grep`` read "surge/…"); at a
narrow terminal, the dagger's name and cluster are kept and the figures give way. ``show`` says what the
progress report means, not its JSON (``--json`` keeps that), and when the last error came before a restart.
A list with nothing in it says how to make the first one instead of drawing an empty box."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table
from typer import Typer
from typer.testing import CliRunner

from job.cli.common import print_table
from job.cli.control import register
from job.cli.control.dagger_views import dagger_table, progress_lines
from job.control.views import DaggerView

NAME = "surge/bookings-per-s2-jakarta-and-surabaya"
PROGRESS = {
    "batches": 2,
    "input_rows": 10000,
    "late_rows_dropped": 3,
    "bad_records": 1,
    "input_rows_per_s": 1234.4,
    "batch_duration_ms": 846,
    "batch_phases_ms": {
        "addBatch": 494,
        "commitOffsets": 102,
        "getBatch": 0,
        "latestOffset": 1,
        "queryPlanning": 137,
        "triggerExecution": 846,
        "walCommit": 101,
    },
    "watermark": "2026-11-29T07:55:48.794Z",
    "sinks": {
        "influx": {
            "sink_type": "influx",
            "rows_written": 176,
            "writes": 2,
            "retries": 1,
            "failures": 0,
            "last_error": None,
            "target": "measurement m in database d",
            "first_window": "07:55",
            "last_window": "07:57",
        }
    },
}


HEALTH = {
    "state": "running",
    "reason": "reading",
    "rows_per_s": {"value": 1234.4, "at": 0.0, "age_s": 2.0, "fresh": True},
    "lag": {"value": 17.0, "at": 0.0, "age_s": 4.0, "fresh": True},
    "batch_ms": {"value": 846.0, "at": 0.0, "age_s": 300.0, "fresh": False},
}


def _dagger() -> DaggerView:
    return DaggerView(
        health=HEALTH,
        id=1,
        name=NAME.split("/")[1],
        team="surge",
        cluster="surge-jkt-1",
        datacentre="jakarta",
        current_version=12,
        desired_state="running",
        actual_state="running",
        running_version=12,
        restarts=3,
        last_error=None,
        last_exit_code=None,
        progress=PROGRESS,
        lag=17,
        pid=None,
        host=None,
        checkpoint=None,
        started_at=None,
        status_updated_at=None,
        created_by="ops",
        created_at=0.0,
        updated_at=0.0,
    )


def test_a_table_to_a_pipe_is_printed_whole() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80)  # not a terminal: what a pipe gets
    print_table(console, dagger_table([_dagger()]))
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 5 and len(lines[0]) > 80, lines  # top, header, rule, one row, bottom
    assert [c.strip() for c in lines[3].split("│")[1:-1]] == [
        NAME,
        "surge-jkt-1",
        "12",
        "running",
        "running",
        "running",
        "1234",
        "17",
        "846 (5m old)",
        "3",
    ]
    assert [c.strip() for c in lines[1].split("┃")[1:-1]] == [
        "dagger",
        "cluster",
        "v",
        "desired",
        "actual",
        "health",
        "rows/s",
        "lag",
        "batch ms",
        "restarts",
    ]


def test_a_table_that_fits_prints_as_rich_would() -> None:
    table = Table("service", "health")
    table.add_row("broker", "healthy")
    ours, theirs = io.StringIO(), io.StringIO()
    print_table(Console(file=ours, width=80), table)
    Console(file=theirs, width=80).print(table)
    assert ours.getvalue() == theirs.getvalue() and "│ broker  │ healthy │" in ours.getvalue()


def test_at_a_narrow_terminal_the_name_and_cluster_are_kept() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None)
    print_table(console, dagger_table([_dagger()]))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if NAME in line)
    assert "surge-jkt-1" in row


def test_show_says_what_the_progress_means() -> None:
    assert progress_lines(_dagger()) == [
        "read 10,000 rows in 2 batches (3 late rows dropped, 1 bad record); 1,234 rows/s now; lag 17 records",
        "last batch 846 ms, 5 min ago (stale) (addBatch 494, queryPlanning 137, commitOffsets 102, walCommit 101)",
        "watermark 2026-11-29T07:55:48.794Z",
        "sink influx: 176 rows in 2 writes (1 retry, 0 failures) to measurement m in database d; windows 07:55 "
        "to 07:57",
    ]
    assert progress_lines(replace(_dagger(), progress={})) == []
    fused = replace(_dagger(), progress={**_dagger().progress, "late_before_filter": True})
    assert progress_lines(fused)[0].startswith(
        "read 10,000 rows in 2 batches (up to 3 late rows dropped (of its stream, before its WHERE), 1 bad record)"
    )


def test_an_empty_list_says_how_to_make_the_first_one(tmp_path: Path) -> None:
    app = Typer()
    register(app)

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--state-dir", str(tmp_path)], env={"DAGGERS_USER": "ops"})
        assert result.exit_code == 0, result.output
        return result.output

    run("registry", "init", "--admin", "ops")
    assert (
        run("dagger", "list")
        == "No daggers in your teams yet: daggers dagger create SPEC --cluster CLUSTER --deploy\n"
    )
    assert run("dagger", "list", "--search", "surge") == "No daggers match.\n"
    assert run("cluster", "list").startswith(
        "No clusters of your teams yet. A team admin adds one: daggers cluster add"
    )
    assert run("team", "list").startswith("No teams you can see.")
    run("team", "add", "surge")
    assert "┃ team  ┃ members ┃" in run("team", "list")
