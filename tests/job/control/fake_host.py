"""A stand-in for ``python -m job.shared.host`` in the controller's unit tests: a real process that
speaks the host's file protocol (job.shared.channel) without starting Spark.

``fake_host.py FOLDER`` writes host.json (ready, with its PID and start time), then every 0.05 s
starts each new assignment (a token it has not seen), stops removed ones, and replaces re-tokened
ones. A running dagger writes ``<checkpoint>/status.json`` like the runner does. A dagger whose spec
name ends in ``-fails`` reports ``failed`` with a Sink error (as text and as its failure record, as the
host does); one whose name ends in ``-hangs`` does not stop when unassigned (``stopping``, as a sink
retrying a write) until a kill is asked for its run (``HostFolder.kill``); then it reports ``stopped`` and
appends ``killed <token>`` to ``<checkpoint>/kills.txt``. Each start appends ``<host pid> <token>`` to
``<checkpoint>/starts.txt``. SIGTERM stops everything and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import yaml

from job.errors import SinkError
from job.query.failure_record import FailureRecord
from job.shared.channel import HostFolder
from job.stack.process import process_start_time


def main() -> int:
    folder = HostFolder(Path(sys.argv[1]))
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    pid = os.getpid()
    folder.report_host(pid=pid, start_time=process_start_time(pid), state="ready", master=sys.argv[2])
    running: dict[str, tuple[str, Path, int]] = {}  # key -> (token, checkpoint, rows)
    ended: dict[str, str] = {}  # key -> token that ended
    hanging: dict[str, tuple[str, Path]] = {}  # key -> (token, checkpoint) of a run that does not stop
    while not stopping:
        wanted = folder.assignments()
        for key in list(running):
            if key not in wanted or wanted[key]["token"] != running[key][0]:
                token, checkpoint, _ = running.pop(key)
                if key.endswith("-hangs"):
                    hanging[key] = (token, checkpoint)
                    folder.report(key, token, "stopping")
                else:
                    folder.report(key, token, "stopped")
        for key in folder.kills():
            asked = folder.kill_asked(key) or {}
            if key in hanging and hanging[key][0] == asked.get("token"):
                token, checkpoint = hanging.pop(key)
                with (checkpoint / "kills.txt").open("a") as fh:
                    fh.write(f"killed {token}\n")
                folder.report(key, token, "stopped")
            if key not in hanging:
                folder.killed(key)
        for key, want in wanted.items():
            if key in running or key in hanging or ended.get(key) == want["token"]:
                continue
            spec = yaml.safe_load(Path(want["spec"]).read_text())
            checkpoint = Path(spec["checkpoint_dir"])
            checkpoint.mkdir(parents=True, exist_ok=True)
            with (checkpoint / "starts.txt").open("a") as fh:
                fh.write(f"{pid} {want['token']}\n")
            if spec["name"].endswith("-fails"):
                error = SinkError("InfluxDB at http://127.0.0.1:9 is unreachable", hint="is influxd running?")
                folder.report(
                    key,
                    want["token"],
                    "failed",
                    error=error.state_text(),
                    failure=FailureRecord.of(error).as_json(),
                )
                ended[key] = want["token"]
                continue
            folder.report(key, want["token"], "running")
            running[key] = (want["token"], checkpoint, 0)
        for key, (token, checkpoint, rows) in running.items():
            running[key] = (token, checkpoint, rows + 100)
            status = checkpoint / "status.json"
            tmp = status.with_suffix(".tmp")
            tmp.write_text(
                json.dumps(
                    {
                        "batches": rows // 100 + 1,
                        "input_rows": rows + 100,
                        "state": "running",
                        "updated_at": time.time(),
                    }
                )
            )
            tmp.replace(status)
        time.sleep(0.05)
    for key, (token, _, _) in running.items():
        folder.report(key, token, "stopped")
    folder.report_host(pid=pid, state="exited", master=sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
