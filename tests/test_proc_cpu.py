"""The machine's CPU account of a test run (scripts/proc_cpu.py): a real recorder charges a process that
burns CPU to the test it was started under, also after its parent is gone, and the report sums it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "proc_cpu.py"
# burns 1.5 s of CPU, says so (its pid in a file), then waits to be killed
BURN = (
    "import os, sys, time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(120)"
)


def test_a_process_is_charged_to_the_test_it_started_under_even_orphaned(tmp_path: Path) -> None:
    out, burnt = tmp_path / "procs.json", tmp_path / "burnt"
    recorder = subprocess.Popen([sys.executable, str(SCRIPT), "record", str(out)])
    try:
        env = {
            **os.environ,
            "PYTEST_CURRENT_TEST": "tests/job/test_x.py::test_burn (call)",
            "PYTEST_XDIST_WORKER": "gw7",
        }
        # the burner's parent exits at once: the burner is reparented, as a SIGKILLed dagger's JVM is
        subprocess.run(["sh", "-c", f'{sys.executable} -c "$0" {burnt} & exit 0', BURN], env=env, check=True)
        deadline = time.monotonic() + 120
        while not (burnt.exists() and burnt.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert burnt.read_text(), "the burner did not burn its 1.5 s of CPU within 120 s"
    finally:
        recorder.send_signal(signal.SIGTERM)  # it samples once more, then writes
        recorder.wait(60)
        if burnt.exists() and burnt.read_text():
            os.kill(int(burnt.read_text()), signal.SIGKILL)
    rows = [r for r in json.loads(out.read_text()).values() if r[2] == "tests/job/test_x.py::test_burn"]
    burner = max(rows, key=lambda r: r[0])
    assert 1.4 <= burner[0] <= 2.5 and burner[3] == "gw7" and burner[1].startswith("python")

    report = subprocess.run(
        [sys.executable, str(SCRIPT), "report", str(out), "--top", "50"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module_line = next(line for line in report.splitlines() if line.endswith("  tests/job/test_x.py"))
    assert 1.0 <= float(module_line.split()[0]) <= 3.0


def test_the_report_sums_by_kind_and_by_module(tmp_path: Path) -> None:
    path = tmp_path / "procs.json"
    path.write_text(
        json.dumps(
            {
                "10:1": [12.0, "java:pyspark-shell", "tests/job/test_a.py::test_one", "gw0"],
                "11:1": [3.0, "python:cli", "tests/job/test_a.py::test_two", "gw0"],
                "12:1": [5.0, "java:pyspark-shell", "tests/tui/test_b.py::test_one", "gw1"],
                "13:1": [7.0, "python:xdist", "", "gw1"],
                "14:1": [1.0, "bash", "", ""],
            }
        )
    )
    report = subprocess.run(
        [sys.executable, str(SCRIPT), "report", str(path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert report[0] == "28 core-s in 5 processes"
    assert report[3:5] == ["      17  java:pyspark-shell", "       7  python:xdist"]
    modules = report[report.index("  core-s  test module") + 1 :][:5]
    assert modules == [
        "      15  tests/job/test_a.py",
        "       7  (test process or session)",
        "       5  tests/tui/test_b.py",
        "       1  (no test)",
        "",
    ]
