"""A smoke run of ``daggers tui`` in a real terminal (tmux): start it as a user, walk from the clusters
to a dagger and back with keys, read the screen, quit."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from job.control import Registry
from tests.tui.tui_world import build

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_console_in_tmux(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    build(registry)
    registry.close()
    socket, session = f"daggers-{uuid.uuid4().hex[:8]}", "console"

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=30, check=True
        ).stdout

    def press(*keys: str) -> None:
        for key in keys:  # one at a time, as a person types: a key may change the focus for the next
            tmux("send-keys", "-t", session, key)
            time.sleep(0.3)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", session)

    def wait_for(text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = screen()
            if text in shown:
                return shown
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{screen()}")

    command = (
        f"cd {REPO} && unset COLUMNS LINES && DAGGERS_USER=alice {sys.executable} -m job.cli.control tui --registry {url}; "
        "echo CONSOLE-EXITED-$?; sleep 30"
    )
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    try:
        shown = wait_for("a-jkt")
        assert "alice · team-a: editor" in shown and "a-sgp" in shown and "b-jkt" not in shown
        press("Enter")
        shown = wait_for("dag-00")
        assert "page 1/2" in shown and "b-secret" not in shown
        press("/", "l", "i", "v", "e", "Enter")
        wait_for("· 1 shown")
        press("Enter")
        shown = wait_for("Publish to Kafka")
        assert "team-a/live-bookings" in shown and "running" in shown and "pid 4242 on gw-1" in shown, shown
        press("Escape")
        wait_for("sorted by name")
        press("C-q")
        wait_for("CONSOLE-EXITED-0", 30)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)
