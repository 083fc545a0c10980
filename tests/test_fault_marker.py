"""The slow fault tests stay a group of their own: a test module over FAULT_S in tests/durations.json that sends a
component SIGKILL or SIGSTOP marks its fault tests ``fault``, so that scripts/check.sh and scripts/test.sh can
leave them out while CI (scripts/test.sh --all) runs them."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a module takes (tests/durations.json) from which its kills and freezes count as a fault group.
FAULT_S = 50.0
#: Modules over FAULT_S that send SIGKILL without being about a fault, and why.
NOT_FAULTS = {
    "tests/test_install_extras.py": "SIGKILL only ends an install that hangs",
    "tests/job/cli/test_run_cli.py": "SIGKILL only cleans up the command under test",
}
KILLS = re.compile(r"signal\.SIG(KILL|STOP)\b|SIGSTOP")


def test_the_fault_marker_is_registered() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    markers = config["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("fault: ") for m in markers), markers


def test_every_slow_module_that_kills_a_component_marks_its_fault_tests() -> None:
    durations: dict[str, float] = json.loads((ROOT / "tests" / "durations.json").read_text())
    unmarked = [
        module
        for module, seconds in sorted(durations.items())
        if seconds >= FAULT_S
        and module not in NOT_FAULTS
        and (ROOT / module).is_file()
        and KILLS.search(text := (ROOT / module).read_text())
        and "pytest.mark.fault" not in text
    ]
    assert unmarked == []


def test_the_fast_check_leaves_the_fault_group_out_and_ci_runs_it() -> None:
    check = (ROOT / "scripts" / "check.sh").read_text()
    assert '-m "not integration and not slow and not fault"' in check
    tests = (ROOT / "scripts" / "test.sh").read_text()
    assert 'group=(-m "not fault")' in tests and "--all) group=(); shift ;;" in tests
    assert "--faults) group=(-m fault); shift ;;" in tests
    pytest_line = tests.split("-m pytest", 1)[1].split("||")[0]
    assert ' ${group[@]+"${group[@]}"} "$@"' in pytest_line and " -m " not in pytest_line, pytest_line
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.startswith("#")]
    assert "bash scripts/test.sh --all" in ci, ci
