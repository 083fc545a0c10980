"""A host that starts reports ``stopped`` for each run a host process before it left not ended and that no
assignment asks for any more (job.shared.host.end_left_over); it leaves alone the runs it starts again and
those that ended. The files are real; no Spark is needed (the e2e case is
tests/job/control/test_stop_while_relaunching.py)."""

from __future__ import annotations

from pathlib import Path

from job.shared.channel import HostFolder
from job.shared.host import end_left_over


def test_runs_left_not_ended_and_unassigned_are_stopped(tmp_path: Path) -> None:
    f = HostFolder(tmp_path / "host")
    f.report("gone", "t1", "running", checkpoint="/c/gone", pool="dagger-gone", query_id="q1")
    f.report("stopping", "t1", "stopping")
    f.report("kept", "t1", "running")
    f.assign("kept", tmp_path / "kept.yaml", tmp_path, "t1")
    f.report("retoken", "t1", "starting")
    f.assign("retoken", tmp_path / "retoken.yaml", tmp_path, "t2")
    f.report("failed", "t1", "failed", error="Sink error: x")
    f.report("done", "t1", "stopped")

    assert end_left_over(f) == ["gone", "retoken", "stopping"]
    states = {k: (s["token"], s["state"]) for k, s in f.states().items()}
    assert states == {
        "done": ("t1", "stopped"),
        "failed": ("t1", "failed"),
        "gone": ("t1", "stopped"),
        "kept": ("t1", "running"),  # started again by this host, which reports it itself
        "retoken": ("t1", "stopped"),
        "stopping": ("t1", "stopped"),
    }
    gone = f.state("gone") or {}
    assert (gone["checkpoint"], gone["pool"], gone["query_id"]) == ("/c/gone", "dagger-gone", "q1")
    assert end_left_over(f) == []
