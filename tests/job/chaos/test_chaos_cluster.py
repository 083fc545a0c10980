"""A short real chaos run under the control plane: the cluster the dagger runs on dies (controller and
dagger SIGKILLed) after the dagger has read part of the load, the other cluster's controller takes it
over from its checkpoint, and InfluxDB still equals the ground truth; nothing is left running afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from job.chaos.experiment import Case, Experiment, Load
from job.chaos.runner import ChaosRun
from job.chaos.world import processes_in
from job.stack.process import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]


def test_cluster_kill_fails_over_exactly_and_leaves_nothing_running(tmp_path: Path) -> None:
    exp = Experiment(
        name="cluster",
        description="chaos-a dies; chaos-b takes the dagger over",
        dagger="examples/bookings-per-s2.yaml",
        load=Load(stream="booking", topic="chaos-cluster", events_per_s=300, duration_s=45, partitions=2),
        # at 10 s, or later: once the dagger has read (a cold dagger needs 20-70 s for its first batch on a busy
        # 2-core machine), so chaos-b resumes a real checkpoint
        cases=[
            Case(name="cluster lost", target="cluster", fault="kill", at_s=10, after_read=1, downtime_s=10)
        ],
        failover_after_s=5,
        recover_timeout_s=240,
    )
    out = tmp_path / "out"
    run = ChaosRun(exp, out, log=print)
    t0 = time.monotonic()
    report = run.run()
    print(f"\nrun took {time.monotonic() - t0:.0f} s; cases {report.cases}; moves {report.moves}")
    assert report.mode == "control-plane"
    assert report.exact, [w for w in report.windows if w.matching != w.expected_points]
    assert sum(w.expected_points for w in report.windows) > 50
    [case] = report.cases
    # it had read events on chaos-a (so chaos-b resumed a real checkpoint), and read them all on chaos-b
    # (the fault waited for that sample: both times are rounded to 0.1 s, and may be equal)
    assert any(s.read > 0 for s in report.samples if s.cluster == "chaos-a" and s.t <= case.started_s), (
        "the dagger had read nothing on chaos-a before the kill"
    )
    assert report.rows_read == report.events_in_topic
    assert (case.cluster, case.moved_to) == ("chaos-a", "chaos-b")
    assert case.running_again_s is not None and case.running_again_s > exp.failover_after_s
    assert [(m["action"], m["user"], m["details"]["from"], m["details"]["to"]) for m in report.moves] == [
        ("failover", "controller:chaos-b", "chaos-a", "chaos-b")
    ]
    assert report.dagger_restarts >= 1
    md = (out / "report.md").read_text()
    assert "outputs equal the ground truth: yes" in md and "## Moves (control-plane audit)" in md
    assert json.loads((out / "report.json").read_text())["cases"][0]["moved_to"] == "chaos-b"
    # two controller processes at first, chaos-a's again after the kill; at least two dagger processes
    assert run.world is not None and len(run.world.pids()) >= 5
    assert [pid for pid in run.world.pids() if pid_alive(pid)] == []
    assert processes_in(out) == []
