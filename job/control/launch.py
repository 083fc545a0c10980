"""``python -m job.control.launch SPEC --state-dir DIR --master MASTER``: one dagger, as a controller runs it.

``--standby READY_FILE`` starts Python, the JVM and the Spark session (and runs a first tiny job) before
any dagger is known, then waits for one on stdin: the controller keeps such a warm process ready, so a
deploy does not wait for Spark to start. Each process still runs exactly one dagger.

It is ``daggers run`` (the same :func:`job.query.runner.run_foreground`, SIGTERM for a graceful stop, known
errors printed as ``title: message`` with exit code 2) plus the run's failure record in its state folder
(``failure.json``, see :mod:`job.query.failure_record`) and a liveness file for the controller:
``<checkpoint>/query.json``, written by a StreamingQueryListener when Spark reports the query started
and refreshed on every progress and idle event. The runner's ``status.json`` only changes after a
micro-batch, so without it a dagger that resumes onto topics with nothing new would look "starting"
forever.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from job.common.words import counted
from job.errors import DaggerError
from job.query.liveness import QUERY_FILE, liveness_listener

log = logging.getLogger("daggers.launch")


def _warm(spark: Any) -> None:
    """Start what a dagger's first batch would otherwise wait for: the data source, the functions, a job
    on the executors and a Python worker."""
    from job.functions.spark_udfs import register_functions
    from job.sources.kafka import register_source

    register_source(spark)
    register_functions(spark)
    spark.sql("SELECT S2Id(-6.2, 106.8, 13) AS cell, count(1) AS n FROM range(4) GROUP BY 1").collect()


def _wait_for_assignment(ready_file: Path) -> tuple[Path, Path] | None:
    """Say the standby is ready, then block until the controller writes ``{"spec", "state_dir"}`` on stdin;
    return them, or None when stdin closes without an assignment."""
    ready_file.parent.mkdir(parents=True, exist_ok=True)
    ready_file.write_text(json.dumps({"at": time.time()}))
    line = sys.stdin.readline()
    if not line.strip():
        return None
    data = json.loads(line)
    return Path(data["spec"]), Path(data["state_dir"])


def _record(state_dir: Path | None, exc: BaseException) -> None:
    """Write the failure record of ``exc`` into the dagger's state folder (:mod:`job.query.failure_record`),
    before the error is printed; a record that cannot be written is logged, and the log is what remains."""
    from job.query.failure_record import failure_of, write_failure

    if state_dir is None:
        return
    try:
        write_failure(state_dir, failure_of(exc))
    except Exception as err:  # noqa: BLE001 - the error itself is still printed
        log.warning("cannot write the failure record in %s: %s", state_dir, err)


def main(argv: list[str] | None = None) -> int:
    """Run the dagger of a spec file until SIGTERM; return the exit code (0, or 2 for a known error).

    A run that ends on an error (a known one, or an unexpected exception, which is raised again) leaves its
    record in ``<state dir>/failure.json`` (:mod:`job.query.failure_record`), which the controller shows.

    With ``--standby``, start Spark first and wait for the spec on stdin (see :func:`_wait_for_assignment`).
    """
    from job.query.plan import plan
    from job.query.runner import run_foreground
    from job.shared import forkserver
    from job.spark.session import build_session
    from job.spec import load_spec

    parser = argparse.ArgumentParser(prog="python -m job.control.launch", description=__doc__)
    parser.add_argument("spec", type=Path, nargs="?", help="The dagger spec file (checkpoint_dir set).")
    parser.add_argument("--state-dir", type=Path, help="The dagger's state folder.")
    parser.add_argument("--master", default="local[*]", help="Spark master: local[*] or spark://host:port.")
    parser.add_argument(
        "--standby",
        type=Path,
        metavar="READY_FILE",
        help="Start Spark now, write READY_FILE, then read the assignment from stdin.",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = None
    forkserver.start_if_local(args.master)
    try:
        if args.standby is not None:
            spark = build_session("daggers-standby", master=args.master)
            _warm(spark)
            assigned = _wait_for_assignment(args.standby)
            if assigned is None:
                return 0
            args.spec, args.state_dir = assigned
        if args.spec is None or args.state_dir is None:
            parser.error("give SPEC and --state-dir, or --standby READY_FILE")
        p = plan(load_spec(args.spec), args.state_dir)
        print(f"dagger {p.spec.name}: checkpoint {p.checkpoint}", flush=True)
        if spark is None:
            spark = build_session(
                f"dagger-{p.spec.name}",
                master=args.master,
                shuffle_partitions=p.spec.parallelism,
                extra=p.spec.spark_conf,
            )
        else:
            spark.conf.set("spark.sql.shuffle.partitions", str(p.spec.parallelism))
        spark.streams.addListener(liveness_listener(p.checkpoint / QUERY_FILE))
        progress = run_foreground(p, spark=spark)
    except DaggerError as exc:
        _record(args.state_dir, exc)
        print(f"{exc.title}: {exc.message}", file=sys.stderr, flush=True)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:  # a bug: recorded, then Python's traceback and exit code 1
        _record(args.state_dir, exc)
        raise
    finally:
        if spark is not None:
            spark.stop()
    print(
        f"stopped after {counted(progress.batches, 'batch')}: {counted(progress.input_rows, 'row')} read, "
        f"{counted(progress.late_rows_dropped, 'late row')} dropped, {counted(progress.bad_records, 'bad record')} skipped",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
