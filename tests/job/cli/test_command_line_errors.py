"""A command line ``daggers`` cannot read (an unknown option or command, a bad or missing value) prints the
error model's one line naming the option, and a hint, and exits 2: never click's usage box or a traceback.
Run on the real console script, as a user's shell runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DAGGERS = Path(sys.executable).parent / "daggers"


def daggers(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("DAGGERS_DEBUG", None)
    return subprocess.run(
        [str(DAGGERS), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (["dagger", "list", "--limit", "x"], "No such option: --limit", "daggers dagger list"),
        (
            ["produce", "--stream", "booking", "--topic", "t", "--rate", "abc"],
            "Invalid value for '--rate': abc is not a number",
            "daggers produce",
        ),
        (
            ["produce", "--stream", "booking", "--topic", "t", "--count", "1.5"],
            "Invalid value for '--count': 1.5 is not a whole number",
            "daggers produce",
        ),
        (
            ["server", "--port", "70000"],
            "Invalid value for '--port': 70000 is not a whole number up to 65535",
            "daggers server",
        ),
        (
            ["produce", "--stream", "nope", "--topic", "t"],
            "Invalid value for '--stream' / '-s': 'nope' is not one of 'driver_location', 'booking', 'api_log'.",
            "daggers produce",
        ),
        (["status", "--bogus"], "No such option: --bogus", "daggers status"),
        (["--bogus"], "No such option: --bogus", "daggers"),
        (["nosuch"], "No such command 'nosuch'.", "daggers"),
        (["dagger", "lst"], "No such command 'lst'. Did you mean 'list'?", "daggers dagger"),
        (["sql", "check"], "Missing argument 'spec'.", "daggers sql check"),
        (
            ["--debug", "sql", "check", "s.yaml", "--state-dir"],
            "Option '--state-dir' requires an argument.",
            "daggers sql check",
        ),
    ],
)
def test_a_bad_command_line_is_one_line_and_a_hint(
    tmp_path: Path, args: list[str], message: str, hint: str
) -> None:
    result = daggers(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines()[-2:] == [f"Invalid command line: {message}", f"hint: see {hint} --help"]
    if "--debug" not in args:  # --debug prints the error's trace first
        assert result.stderr == f"Invalid command line: {message}\nhint: see {hint} --help\n"
    assert "╭" not in result.stderr and "Usage:" not in result.stderr


def test_a_group_without_a_command_still_shows_its_help(tmp_path: Path) -> None:
    result = daggers("sql", cwd=tmp_path)
    assert "Usage: daggers sql [OPTIONS] COMMAND [ARGS]..." in result.stdout + result.stderr
    assert "Invalid command line" not in result.stderr
