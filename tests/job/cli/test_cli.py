"""The daggers command line: known errors print a title and a message and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from job.cli import app

runner = CliRunner()
EXAMPLE = Path("examples/bookings-per-s2.yaml").read_text()


def test_sql_check_ok(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(EXAMPLE)
    result = runner.invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "OK bookings-per-s2" in result.output
    assert "'pickup_lat', 'pickup_long'" in result.output


def test_sql_check_points_at_the_error(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        EXAMPLE.replace("S2Id(pickup_lat, pickup_long, 13) AS", "S2Id(pickup_lat, pickup_lng, 13) AS")
    )
    result = runner.invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "Dagger SQL error: line 2, column 25: unknown column pickup_lng" in result.output
    assert "hint: did you mean pickup_long, pickup_lat?" in result.output
    assert "Traceback" not in result.output


def test_sql_check_json(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(EXAMPLE.replace("count(1)", "cnt(1)"))
    result = runner.invoke(app, ["sql", "check", str(spec), "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert '"line": 4' in result.output and '"col": 8' in result.output


def test_sql_translate(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(EXAMPLE)
    result = runner.invoke(app, ["sql", "translate", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert "window(rowtime, '60 seconds')" in result.output


def test_bad_spec_names_field_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(EXAMPLE.replace("watermark_delay_ms: 10000", "watermark_delay_ms: -5"))
    result = runner.invoke(app, ["run", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "Invalid dagger spec" in result.output
    assert "s.yaml:24: watermark_delay_ms: -5 is not a whole number of at least 0" in result.output
    assert "Traceback" not in result.output


def test_missing_spec_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no spec file at" in result.output


def test_protos_list() -> None:
    result = runner.invoke(app, ["protos", "list"])
    assert result.exit_code == 0
    assert (
        "daggers.events.DriverLocationPing" in result.output and "event_timestamp:timestamp" in result.output
    )
