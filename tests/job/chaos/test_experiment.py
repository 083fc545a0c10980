"""Chaos experiment files: valid ones load; bad ones name the field and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from job.chaos.experiment import TEMPLATE, load_experiment
from job.cli import app
from job.errors import SpecError


def test_example_and_template_load(tmp_path: Path) -> None:
    exp = load_experiment("examples/chaos/outages.yaml")
    assert [c.target for c in exp.cases] == ["broker", "dagger", "influxdb"]
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(name="t"))
    assert load_experiment(path).load.topic == "chaos-t"


def test_bad_fields_are_named_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TEMPLATE.format(name="b").replace("fault: stop", "fault: melt").replace("events_per_s: 2000",
                                                                                          "events_per_s: -1"))
    with pytest.raises(SpecError) as info:
        load_experiment(path)
    text = str(info.value)
    assert f"{path}:7: load.events_per_s: Input should be greater than 0" in text
    assert f"{path}:13: cases[0].fault: Input should be 'stop', 'kill', 'pause' or 'slow'" in text


def test_case_after_the_load_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "late.yaml"
    path.write_text(TEMPLATE.format(name="l").replace("at_s: 120", "at_s: 500"))
    with pytest.raises(SpecError, match=r"cases\[1\] \(dagger killed\) starts at 500.0 s, after the load ends"):
        load_experiment(path)


def test_cli_new_and_list(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert result.exit_code == 0 and (tmp_path / "night.yaml").exists()
    again = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert again.exit_code == 2
    listed = runner.invoke(app, ["chaos", "list", str(tmp_path)])
    assert "night" in listed.output and "2000/s for 180 s" in listed.output


def test_slow_runs_the_target_a_fraction_of_the_time_and_leaves_it_running() -> None:
    """A CPU-bound child counts for 1.5 s while it is stopped 80% of every 100 ms: it gets about a fifth
    of the CPU time it gets alone in as long (an exact share is up to the OS), and runs on afterwards."""
    import os
    import subprocess
    import sys
    import time

    from job.chaos.runner import throttle

    spin = "import time\nt=time.process_time()\nwhile time.process_time()-t<30: pass"
    proc = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
    try:
        time.sleep(0.3)

        def cpu_s() -> float:
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        before = cpu_s()
        time.sleep(1.5)
        alone = cpu_s() - before
        before = cpu_s()
        periods = throttle(proc.pid, 1.5, 0.8)
        throttled = cpu_s() - before
        assert 8 <= periods <= 15  # 100 ms each, fewer when sleeps overrun on a busy machine
        assert throttled < 0.45 * alone, (throttled, alone)
        with open(f"/proc/{proc.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] in ("R", "S")  # running again, not stopped (T)
    finally:
        proc.kill()
        proc.wait()
