"""tests/helpers.py's wait_until: what it returns, when it calls the check, and what it says when it fails."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until


def test_it_returns_the_first_truthy_value_of_the_check() -> None:
    calls: list[int] = []

    def check() -> list[int] | None:
        calls.append(len(calls))
        return calls if len(calls) == 3 else None

    assert wait_until("three calls", check, 30, every_s=0.01) == [0, 1, 2]


def test_the_check_runs_once_more_after_the_deadline_so_a_slow_last_poll_counts() -> None:
    calls: list[float] = []

    def slow_then_true() -> bool:
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(0.3)  # past the deadline
            return False
        return True

    assert wait_until("a slow check", slow_then_true, 0.1, every_s=5) is True
    assert len(calls) == 2


def test_it_times_out_with_what_and_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("early line\n" + "z" * 50 + "the last words")
    calls: list[None] = []
    with pytest.raises(AssertionError) as caught:
        wait_until("the moon", lambda: calls.append(None), 0.2, every_s=0.05, log=log, tail_chars=20)
    message = str(caught.value)
    assert message.startswith("timed out after 0 s waiting for the moon\n")
    assert message.endswith("z" * 6 + "the last words") and "early line" not in message
    assert len(calls) >= 2  # at least once, and once after the deadline


def test_a_missing_log_adds_nothing(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"^timed out after 0 s waiting for nothing$"):
        wait_until("nothing", lambda: 0, 0, log=tmp_path / "absent.log")


def test_a_process_that_exits_fails_the_wait_with_its_code_and_log(tmp_path: Path) -> None:
    log = tmp_path / "proc.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", "print('bye'); raise SystemExit(3)"], stdout=out)
    started = time.monotonic()
    with pytest.raises(AssertionError) as caught:
        wait_until(
            "a file that never comes", (tmp_path / "never").exists, 120, every_s=0.05, proc=proc, log=log
        )
    assert time.monotonic() - started < 60  # not the timeout
    message = str(caught.value)
    assert "(3)" in message and "a file that never comes" in message and message.endswith("bye\n")


def test_a_process_that_exits_after_doing_what_was_waited_for_does_not_fail_it(tmp_path: Path) -> None:
    done = tmp_path / "done"
    proc = subprocess.Popen([sys.executable, "-c", f"open({str(done)!r}, 'w').close()"])
    proc.wait(60)
    assert wait_until("the file", done.exists, 10, proc=proc) is True
