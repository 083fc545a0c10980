"""What ``daggers run --once`` says at the end, and ``daggers --version``."""

from __future__ import annotations

from typer.testing import CliRunner

import job
from job.cli import app
from job.cli.run import written_summary


def test_the_summary_says_rows_target_and_windows_per_sink() -> None:
    sinks = {
        "influx": {
            "rows_written": 1432,
            "target": "measurement m in database d at http://127.0.0.1:8086",
            "first_window": "2026-03-02T08:01:00+00:00",
            "last_window": "2026-03-02T08:05:00+00:00",
        },
        "kafka": {
            "rows_written": 7,
            "target": "topic out at 127.0.0.1:9092",
            "first_window": "2026-03-02T08:01:00+00:00",
            "last_window": "2026-03-02T08:01:00+00:00",
        },
        "log": {"rows_written": 0, "target": "the console"},
    }
    assert written_summary(sinks) == [
        "influx: wrote 1,432 rows to measurement m in database d at http://127.0.0.1:8086, windows ending "
        "2026-03-02 08:01:00 UTC to 2026-03-02 08:05:00 UTC",
        "kafka: wrote 7 rows to topic out at 127.0.0.1:9092, windows ending 2026-03-02 08:01:00 UTC",
        "log: wrote nothing to the console (no window closed yet: a window is written once the watermark passes "
        "its end)",
    ]


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"daggers {job.__version__}\n"
