"""A dagger's failure record (:mod:`job.query.failure_record`): written atomically, read back exactly (a message
with newlines and non-ASCII), a record older than the run ignored, and what the controller shows from it
(:func:`job.control.processes.exit_error`), or from the log when there is none."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from job.control.processes import exit_error
from job.errors import SinkError, SpecError
from job.query import failure_record
from job.query.failure_record import (
    FAILURE_FILE,
    FailureRecord,
    failure_of,
    read_failure,
    write_failure,
)

MESSAGE = "InfluxDB at http://127.0.0.1:9 refused batch 7:\n  point 3: «tag_city» ≠ 雅加达\n\ttab, then end"
HINT = "check the sink's url — or start InfluxDB"


def test_a_record_reads_back_exactly_with_newlines_and_non_ascii(tmp_path: Path) -> None:
    record = FailureRecord.of(SinkError(MESSAGE, hint=HINT), at=1_800_000_000.25)
    path = write_failure(tmp_path / "daggers" / "7-bookings", record)
    assert path == tmp_path / "daggers" / "7-bookings" / FAILURE_FILE
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "title": "Sink error",
        "message": MESSAGE,
        "hint": HINT,
        "at": 1_800_000_000.25,
        "exit_code": 2,
    }
    back = read_failure(path.parent)
    assert back == record
    assert back is not None and back.text() == f"Sink error: {MESSAGE}\nhint: {HINT}"
    assert os.listdir(path.parent) == [FAILURE_FILE]  # no temporary file left


def test_a_write_that_fails_leaves_the_old_record_whole_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = FailureRecord.of(SpecError("old run"), at=100.0)
    write_failure(tmp_path, old)
    renamed: list[tuple[str, str]] = []

    def no_rename(src: str, dst: str) -> None:
        renamed.append((os.path.basename(src), os.path.basename(dst)))
        assert json.loads(Path(src).read_text(encoding="utf-8"))["message"] == MESSAGE  # complete before
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failure_record.os, "replace", no_rename)
    with pytest.raises(OSError, match="No space left"):
        write_failure(tmp_path, FailureRecord.of(SinkError(MESSAGE), at=200.0))
    assert len(renamed) == 1 and renamed[0][1] == FAILURE_FILE and renamed[0][0] != FAILURE_FILE
    assert read_failure(tmp_path) == old
    assert os.listdir(tmp_path) == [FAILURE_FILE]


def test_a_record_written_before_the_run_started_is_not_its_own(tmp_path: Path) -> None:
    write_failure(tmp_path, FailureRecord.of(SinkError("refused"), at=1000.0))
    assert read_failure(tmp_path, since=1000.0) is not None
    assert read_failure(tmp_path, since=1000.5) is None
    assert read_failure(tmp_path / "nowhere") is None


@pytest.mark.parametrize(
    "content",
    [
        '{"title": "Sink error", "message": "cut sh',  # a partial file
        "[]",
        '{"title": "", "message": "m", "hint": null, "at": 1, "exit_code": 2}',
        '{"title": "T", "message": "m", "hint": 3, "at": 1, "exit_code": 2}',
        '{"title": "T", "message": "m", "hint": null, "at": "1", "exit_code": 2}',
        '{"title": "T", "message": "m", "hint": null, "at": 1, "exit_code": true}',
        '{"title": "T", "hint": null, "at": 1, "exit_code": 2}',
    ],
)
def test_what_is_not_a_record_reads_as_none(tmp_path: Path, content: str) -> None:
    (tmp_path / FAILURE_FILE).write_text(content, encoding="utf-8")
    assert read_failure(tmp_path) is None


def test_an_unexpected_exception_is_recorded_with_its_class_and_message() -> None:
    known = failure_of(SinkError("refused", hint="start it"), at=5.0)
    assert known == FailureRecord("Sink error", "refused", "start it", 5.0, 2)
    bug = failure_of(KeyError("window_timestamp"), at=6.0)
    assert bug == FailureRecord("Unexpected error", "KeyError: 'window_timestamp'", None, 6.0, 1)
    assert failure_of(RuntimeError(), at=7.0).message == "RuntimeError"


def test_the_controller_shows_the_record_and_reads_the_log_only_without_one() -> None:
    log = "=== start\nSink error: from the log\nhint: from the log\n"
    record = FailureRecord.of(SinkError(MESSAGE, hint=HINT), at=1.0)
    assert exit_error(record, log, 2) == f"Sink error: {MESSAGE}\nhint: {HINT}"
    long = FailureRecord.of(SinkError("x" * 5000, hint=HINT), at=1.0)
    assert exit_error(long, "", 2) == f"Sink error: {'x' * 2000}\nhint: {HINT}"
    # no record: a process killed before it could write one
    assert exit_error(None, log, 2) == "Sink error: from the log\nhint: from the log"
    assert exit_error(None, "=== start\n", -9) == "killed by signal 9 (SIGKILL)"
    assert exit_error(None, "", 137) == "exited with code 137"
    assert exit_error(None, "", None) == "the process is gone"
