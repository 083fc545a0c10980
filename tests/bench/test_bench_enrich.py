"""bench/bench_enrich.py on tiny data against the test PostgreSQL: every implementation's rows agree and the
report names them; a PostgreSQL that is not there makes it exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from job.stack.ports import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "bench/bench_enrich.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_tiny_run_reports_every_implementation(postgres, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "enrich.md"
    done = bench(
        "--rate", "300", "--batches", "2", "--customers", "500", "--dsn", postgres.dsn, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    report = out.read_text()
    assert report == done.stdout.removesuffix("\n")
    assert "2 one-second micro-batches of 300 events (600 in all)" in report
    for name in (
        "daggers: Enricher",
        "per-row Python loop + dict cache",
        "per-row Python loop, one query an event",
    ):
        assert f"| {name}" in report
    assert "2 queries" in report  # one = ANY($1) query a batch


def test_a_missing_postgresql_exits_1() -> None:
    done = bench(
        "--rate", "10", "--batches", "1", "--dsn", f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    )
    assert done.returncode == 1
    assert done.stderr.startswith("FAILED: OperationalError")
