"""Tables as a person and a script read them: to a pipe or a file, whole (rich squeezed them into 80
columns and ``daggers dagger list | grep`` read "surge/…"); at a narrow terminal, the dagger's name and
cluster are kept and the figures give way."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from job.cli.common import print_table
from job.cli.control import _dagger_table
from job.control.views import DaggerView

NAME = "surge/bookings-per-s2-jakarta-and-surabaya"


def _dagger() -> DaggerView:
    return DaggerView(id=1, name=NAME.split("/")[1], team="surge", cluster="surge-jkt-1", datacentre="jakarta",
                      current_version=12, desired_state="running", actual_state="running", running_version=12,
                      restarts=3, last_error=None, last_exit_code=None,
                      progress={"input_rows_per_s": 1234.4, "batch_duration_ms": 846}, lag=17, pid=None,
                      host=None, checkpoint=None, started_at=None, status_updated_at=None, created_by="ops",
                      created_at=0.0, updated_at=0.0)


def test_a_table_to_a_pipe_is_printed_whole() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80)  # not a terminal: what a pipe gets
    print_table(console, _dagger_table([_dagger()]))
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 5 and len(lines[0]) > 80, lines  # top, header, rule, one row, bottom
    assert [c.strip() for c in lines[3].split("│")[1:-1]] == [
        NAME, "surge-jkt-1", "12", "running", "running", "1234", "17", "846", "3"]
    assert [c.strip() for c in lines[1].split("┃")[1:-1]] == [
        "dagger", "cluster", "v", "desired", "actual", "rows/s", "lag", "batch ms", "restarts"]


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
    print_table(console, _dagger_table([_dagger()]))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if NAME in line)
    assert "surge-jkt-1" in row
