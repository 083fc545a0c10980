"""bench/bench_health.py's verdict: a fault not detected fails the run, and the report says which."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.bench_health import exit_code, load_line, report
from bench.health_faults import Detection


def test_a_fault_not_detected_fails_the_run() -> None:
    seen = Detection("controller killed", "unknown", 60, 12.1)
    missed = Detection("broker down", "stalled", 180, None)
    assert exit_code([seen]) == 0
    assert exit_code([seen, missed]) == 1
    assert exit_code([]) == 1
    text = report([seen, missed], "python bench/bench_health.py", datetime(2026, 12, 1, tzinfo=UTC), "box")
    assert "| controller killed | unknown | 12.1 | 60 | - |" in text
    assert "| broker down | stalled | NOT DETECTED | 180 | - |" in text
    assert "**1 fault(s) not detected: broker down**" in text


def test_the_report_says_the_state_and_reason_shown() -> None:
    """Each fault's row says what the dagger showed last (a pipe in a reason kept out of the table's columns),
    and a step that broke says its error."""
    row = {"health": {"state": "stalled", "reason": "its brokers do not answer: a|b"}}
    seen = Detection("source stalled", "stalled", 120, 31.4, row)
    broke = Detection("lagging", "?", 0.0, None, {"error": "AssertionError: no JVM"})
    text = report([seen, broke], "python bench/bench_health.py", datetime(2026, 12, 6, tzinfo=UTC), "box")
    assert "| source stalled | stalled | 31.4 | 120 | stalled: its brokers do not answer: a\\|b |" in text
    assert "| lagging | ? | NOT DETECTED | 0 | AssertionError: no JVM |" in text


def test_the_report_says_what_load_ran_beside_it() -> None:
    line = load_line(4, [3.25, 7.9, 5.0])
    assert line == "- load: 4 CPU-bound processes beside the world; load average 3.2-7.9 during the run"
    text = report([], "python bench/bench_health.py --load 4", datetime(2026, 12, 6, tzinfo=UTC), "box", line)
    assert text.splitlines()[5] == line
    assert load_line(0, []) == "- load: 0 CPU-bound processes beside the world"
