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
    path.write_text(
        TEMPLATE.format(name="b")
        .replace("fault: stop", "fault: melt")
        .replace("events_per_s: 2000", "events_per_s: -1")
    )
    with pytest.raises(SpecError) as info:
        load_experiment(path)
    text = str(info.value)
    assert f"{path}:7: load.events_per_s: -1 is not a number over 0" in text
    assert f"{path}:13: cases[0].fault: Input should be 'stop', 'kill', 'pause' or 'slow'" in text


def test_cluster_cases_run_under_the_control_plane(tmp_path: Path) -> None:
    exp = load_experiment("examples/chaos/cluster-failover.yaml")
    assert exp.controlled and exp.failover_after_s == 5
    assert [(c.target, c.fault) for c in exp.cases] == [("cluster", "kill"), ("dagger", "kill")]
    assert not load_experiment("examples/chaos/outages.yaml").controlled
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(name="t").replace("target: broker", "target: rack"))
    with pytest.raises(
        SpecError,
        match=r"cases\[0\]\.target: Input should be 'broker', 'influxdb', 'dagger' "
        r"or 'cluster'",
    ):
        load_experiment(path)


def test_overlapping_cluster_cases_and_a_zero_failover_are_rejected(tmp_path: Path) -> None:
    base = TEMPLATE.format(name="o").replace("target: broker", "target: cluster")
    path = tmp_path / "o.yaml"
    path.write_text(base.replace("target: dagger", "target: cluster").replace("at_s: 120", "at_s: 60"))
    with pytest.raises(
        SpecError,
        match=r"cases\[1\] \(dagger killed\) hits a cluster at 60.0 s, while cases\[0\] "
        r"\(broker down\) still does \(until 70.0 s\)",
    ):
        load_experiment(path)
    path.write_text(base.replace("target: dagger", "target: cluster"))  # one after the other: fine
    assert load_experiment(path).controlled
    path.write_text(base + "failover_after_s: 0\n")
    with pytest.raises(SpecError, match=r"failover_after_s: 0 is not a number over 0 and up to 600"):
        load_experiment(path)


def test_report_shows_where_the_dagger_moved(tmp_path: Path) -> None:
    from job.chaos.report import write_report
    from job.chaos.results import CaseResult, Report

    moves = [
        {
            "at": 0.0,
            "t": 26.5,
            "user": "controller:chaos-b",
            "action": "failover",
            "team": "chaos",
            "target": "dagger chaos/d",
            "allowed": True,
            "details": {
                "from": "chaos-a",
                "to": "chaos-b",
                "reason": "the controller of chaos-a has been silent for 5 s",
            },
        }
    ]
    report = Report(
        experiment="x",
        description="",
        started_at="now",
        duration_s=90,
        events_generated=10,
        events_acknowledged=10,
        events_in_topic=10,
        rows_read=10,
        dagger_restarts=1,
        cases=[
            CaseResult(
                "cluster lost",
                "cluster",
                "kill",
                20.0,
                30.1,
                12.0,
                cluster="chaos-a",
                moved_to="chaos-b",
                running_again_s=19.0,
            )
        ],
        windows=[],
        exact=True,
        mode="control-plane",
        moves=moves,
    )
    md = write_report(report, tmp_path).read_text()
    assert "| cluster lost | cluster | kill | chaos-a | 20.0 | 30.1 | chaos-b | 19.0 | 12.0 |" in md
    assert "| 26.5 | controller:chaos-b | failover | chaos-a | chaos-b | the controller of chaos-a" in md
    assert "ran under the control plane" in md
    import json

    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["cases"][0]["moved_to"] == "chaos-b" and saved["moves"][0]["action"] == "failover"


def test_processes_in_finds_what_works_inside_a_folder(tmp_path: Path) -> None:
    import subprocess
    import sys

    from job.chaos.world import processes_in

    inside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=tmp_path)
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd="/")
    try:
        found = processes_in(tmp_path)
        assert inside.pid in found and outside.pid not in found
    finally:
        for proc in (inside, outside):
            proc.kill()
            proc.wait()


def test_case_after_the_load_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "late.yaml"
    path.write_text(TEMPLATE.format(name="l").replace("at_s: 120", "at_s: 500"))
    with pytest.raises(
        SpecError, match=r"cases\[1\] \(dagger killed\) starts at 500.0 s, after the load ends"
    ):
        load_experiment(path)


def test_cli_new_and_list(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert result.exit_code == 0 and (tmp_path / "night.yaml").exists()
    again = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert again.exit_code == 2
    listed = runner.invoke(app, ["chaos", "list", str(tmp_path)])
    assert "night" in listed.output and "2000/s for 180 s" in listed.output


def test_slow_stops_and_continues_the_target_and_leaves_it_running() -> None:
    """While it is slowed, a CPU-bound child is seen stopped (T) and running in turn, one SIGSTOP and one
    SIGCONT a period; afterwards it runs on. (How much CPU it gets is up to the OS and the machine's load:
    bench/, not a test.)"""
    import subprocess
    import sys
    import threading
    import time

    from job.chaos.runner import throttle

    spin = "import time\nt=time.process_time()\nwhile time.process_time()-t<30: pass"
    proc = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
    seen: list[str] = []
    done = threading.Event()

    def state() -> str:
        with open(f"/proc/{proc.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def watch() -> None:
        while not done.is_set():
            seen.append(state())
            time.sleep(0.005)

    try:
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            periods = throttle(proc.pid, 1.0, 0.8)
        finally:
            done.set()
            watcher.join()
        assert periods >= 1
        assert "T" in seen and {"R", "S"} & set(seen), seen
        assert state() in ("R", "S")  # running again, not stopped (T)
    finally:
        proc.kill()
        proc.wait()
