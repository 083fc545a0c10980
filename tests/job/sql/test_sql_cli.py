"""``daggers sql check`` and ``daggers sql translate`` on HOP windows, nested windows and two-stream
joins: the Spark SQL and the plan, or the error with its line and column."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from job.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]

HOP_SQL = """SELECT city_id AS tag_city_id, count(1) AS n,
  HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS window_timestamp
FROM data_stream
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), city_id"""

NESTED_SQL = """SELECT TUMBLE_END(rt, INTERVAL '5' MINUTE) AS window_timestamp, SUM(n) AS n
FROM (SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, city_id, count(1) AS n
      FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id) AS m
GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE)"""

JOIN_SQL = """SELECT count(1) AS n, TUMBLE_END(b.rowtime, INTERVAL '5' MINUTE) AS window_timestamp
FROM bookings AS b
JOIN pings AS p ON b.driver_id = p.driver_id
 AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE
GROUP BY TUMBLE(b.rowtime, INTERVAL '5' MINUTE)"""


def spec_text(sql: str, two_streams: bool = False) -> str:
    block = "\n".join("  " + line for line in sql.splitlines())
    stream = """  - table: {table}
    topics: [{table}-log]
    proto_class: {proto}
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9
    group: g-{table}
"""
    streams = (
        (
            stream.format(table="bookings", proto="daggers.events.BookingLog")
            + stream.format(table="pings", proto="daggers.events.DriverLocationPing")
        )
        if two_streams
        else stream.format(table="data_stream", proto="daggers.events.BookingLog")
    )
    return f"name: cli-sql\nstreams:\n{streams}sql: |\n{block}\nsink:\n  type: log\n"


def write(tmp_path: Path, sql: str, two_streams: bool = False) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(spec_text(sql, two_streams))
    return path


@pytest.mark.parametrize(
    ("sql", "two", "window", "spark_sql"),
    [
        (
            HOP_SQL,
            False,
            '["5 minutes", "1 minutes"]',
            "GROUP BY city_id, window(rowtime, '5 minutes', '1 minutes')",
        ),
        (
            NESTED_SQL,
            False,
            '["5 minutes", null]',
            "SELECT window.end AS window_timestamp, SUM(n) AS n FROM (SELECT window_time(__dagger_window) AS rt, city_id, n "
            "FROM (SELECT window AS __dagger_window, city_id, COUNT(1) AS n FROM data_stream "
            "GROUP BY city_id, window(rowtime, '1 minutes')) AS __dagger_rowtime) AS m GROUP BY window(rt, '5 minutes')",
        ),
        (
            JOIN_SQL,
            True,
            '["5 minutes", null]',
            "FROM bookings AS b JOIN pings AS p ON b.driver_id = p.driver_id AND p.rowtime BETWEEN b.rowtime AND "
            "b.rowtime + INTERVAL '5' MINUTE GROUP BY window(b.rowtime, '5 minutes')",
        ),
    ],
)
def test_check_and_translate(tmp_path: Path, sql: str, two: bool, window: str, spark_sql: str) -> None:
    spec = write(tmp_path, sql, two)
    check = runner.invoke(app, ["sql", "check", str(spec), "--json", "--state-dir", str(tmp_path)])
    assert check.exit_code == 0, check.output
    assert f'"window": {window}' in " ".join(check.output.split()).replace("[ ", "[").replace(" ]", "]")
    translated = runner.invoke(app, ["sql", "translate", str(spec), "--state-dir", str(tmp_path)])
    assert translated.exit_code == 0, translated.output
    assert spark_sql in " ".join(translated.output.split())


@pytest.mark.parametrize(
    ("sql", "two", "message", "caret_line"),
    [
        (
            HOP_SQL.replace(
                "GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
                "GROUP BY HOP(rowtime, INTERVAL '5' MINUTE)",
            ),
            False,
            "line 4, column 10: HOP takes 3 arguments: HOP(rowtime, INTERVAL slide, INTERVAL size)",
            "   4 | GROUP BY HOP(rowtime, INTERVAL '5' MINUTE), city_id",
        ),
        (
            HOP_SQL.replace(
                "HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
                "HOP_END(rowtime, INTERVAL '2' MINUTE, INTERVAL '5' MINUTE)",
            ),
            False,
            "line 2, column 3: HOP_END must name the same window as the GROUP BY",
            None,
        ),
        (
            NESTED_SQL.replace("city_id, count(1) AS n", "city_id, count(1)"),
            False,
            "line 2, column 75: name this column (... AS name)",
            None,
        ),
        (
            JOIN_SQL.replace("p.driver_id\n", "p.driver\n"),
            True,
            "line 3, column 34: table pings has no column driver",
            "   3 | JOIN pings AS p ON b.driver_id = p.driver",
        ),
    ],
)
def test_check_points_at_the_error(
    tmp_path: Path, sql: str, two: bool, message: str, caret_line: str | None
) -> None:
    spec = write(tmp_path, sql, two)
    result = runner.invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    if caret_line:
        assert caret_line in result.output


@pytest.mark.integration
def test_translate_explain_prints_spark_plan_of_a_join(tmp_path: Path) -> None:
    spec = write(tmp_path, JOIN_SQL, two_streams=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "job.cli",
            "sql",
            "translate",
            str(spec),
            "--explain",
            "--state-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Join Inner" in result.stdout
    assert result.stdout.count("EventTimeWatermark") >= 2  # each stream has its own watermark
