"""A stand-in for ``daggers run`` in the controller's unit tests: a real process that behaves like a
dagger towards its controller without starting Spark.

``fake_dagger.py SPEC MODE`` (or ``fake_dagger.py --standby READY_FILE``, then the spec on stdin):
``run`` writes ``<checkpoint>/status.json`` (as the runner's listener
does) every 0.1 s and exits 0 on SIGTERM; ``crash`` prints a Daggers error and exits 3 (no failure record,
as a process killed before it could write one); ``fail`` ends as launch does on a known error: it writes its
failure record (:data:`FAILED`, a message of two lines) into its state folder (the spec's folder), prints the
error and exits 2; ``hang`` ignores SIGTERM; ``silent`` reports nothing for 1.5 s, then exits 3 (a run that never
came up: a relaunch into a shared host that is gone). Each start appends its PID and the cluster's ``DAGGERS_BOOTSTRAP`` to
``<checkpoint>/starts.txt``, and writes its environment to ``<checkpoint>/env.json``.
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
from job.query.failure_record import failure_of, write_failure

#: The error a dagger in mode ``fail`` ends on.
FAILED = SinkError(
    "InfluxDB at http://127.0.0.1:9 refused batch 3:\n  point 1: «tag_city» ≠ 雅加达",
    hint="check the measurement's tags — or start InfluxDB",
)


def main() -> int:
    if sys.argv[1] == "--standby":  # like launch --standby: say ready, wait for the spec on stdin
        Path(sys.argv[2]).write_text("{}")
        line = sys.stdin.readline()
        if not line.strip():
            return 0
        sys.argv[1:] = [json.loads(line)["spec"], "run"]
    spec_path, mode = Path(sys.argv[1]), sys.argv[2]
    checkpoint = Path(yaml.safe_load(spec_path.read_text())["checkpoint_dir"])
    checkpoint.mkdir(parents=True, exist_ok=True)
    with (checkpoint / "starts.txt").open("a") as fh:
        fh.write(f"{os.getpid()} {os.environ.get('DAGGERS_BOOTSTRAP')} {spec_path.name}\n")
    (checkpoint / "env.json").write_text(json.dumps(dict(os.environ)))
    if mode == "fail":
        time.sleep(0.1)
        write_failure(spec_path.parent, failure_of(FAILED))
        print(f"{FAILED.title}: {FAILED.message}", file=sys.stderr, flush=True)
        print(f"hint: {FAILED.hint}", file=sys.stderr, flush=True)
        return 2
    if mode == "silent":  # a relaunch into a host that is gone: it never comes up, and ends after a while
        time.sleep(1.5)
        print("Dagger error: its shared host is gone", flush=True)
        return 3
    if mode == "crash":
        time.sleep(0.1)
        print("Sink error: cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused", flush=True)
        print("hint: is influxd running?", flush=True)
        return 3
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "hang" else on_term)
    status = checkpoint / "status.json"
    try:
        rows = json.loads(status.read_text())["input_rows"]
    except (OSError, ValueError, KeyError):
        rows = 0
    batch = 0
    while not stopping:
        batch += 1
        rows += 100
        tmp = status.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "batches": batch,
                    "input_rows": rows,
                    "input_rows_per_s": 1000.0,
                    "processed_rows_per_s": 2000.0,
                    "batch_duration_ms": 50 + batch,
                    "late_rows_dropped": 0,
                    "updated_at": time.time(),
                }
            )
        )
        tmp.replace(status)
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
