"""``daggers run`` as a person meets it: it waits for a broker that is not up yet, gives up after
``max_outage_s`` with one line, stops on Ctrl-C with one line, and says what it wrote where."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import termios
import time
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.broker import NoidaBroker, create_topic
from job.stack.ports import free_port
from tests.helpers import (
    bookings_to_influx,
    expected_bookings,
    influx_points,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]
NOISE = ("Traceback", "py4j", "KeyboardInterrupt", "\tat org.apache", "SparkException")


def _spec(tmp_path: Path, bootstrap: str, topic: str, influx_url: str, db: str, max_outage_s: float) -> Path:
    _, text = bookings_to_influx(
        "run", bootstrap, topic, influx_url, db, tmp_path / "ckpt", trigger_interval_s=0.5
    )
    text = text.replace(
        "    start_from: earliest\n", f"    start_from: earliest\n    max_outage_s: {max_outage_s}\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def _daggers(*args: str, log: Path) -> subprocess.Popen:
    """Start ``daggers ARGS`` as a terminal's foreground job: a session of its own whose controlling
    terminal is a pseudo-terminal (its stdin), so that Ctrl-C (SIGINT to the process group) is what a
    user's terminal sends. The terminal's other end
    stays open as long as the Popen object."""
    terminal, child_end = pty.openpty()

    def take_terminal() -> None:  # in the child, after setsid: stdin becomes the controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "job.cli", *args],
        stdin=child_end,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=take_terminal,
        cwd=REPO,
    )
    os.close(child_end)
    weakref.finalize(proc, os.close, terminal)
    return proc


def _java_children(pid: int) -> list[int]:
    """The pids of the ``java`` processes below ``pid`` (its Spark JVM)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
            todo.append(int(child))
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                found.append(int(child))
    return found


def _bookings_with_closer():  # type: ignore[no-untyped-def]
    batch = generate("booking", 3000, seed=41, start=T0, duration_s=300)
    closer = generate("booking", 1, seed=42, start=T0 + timedelta(minutes=15), duration_s=1)
    return batch, closer


def test_a_dagger_waits_for_a_broker_that_is_not_up_yet_then_gives_exact_results(influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The broker's data survives a restart (noida keeps it in its folder): fill a topic, stop the broker.
    port = free_port()
    broker = NoidaBroker(tmp_path / "noida", port)
    broker.start()
    try:
        topic, db = unique("late-broker"), unique("db").replace("-", "_")
        create_topic(broker.bootstrap, topic, 2, kind="noida")
        batch, closer = _bookings_with_closer()
        produce(broker.bootstrap, topic, [batch, closer], progress=False)
    finally:
        broker.stop()
    influxdb.create_database(db)
    spec = _spec(tmp_path, f"127.0.0.1:{port}", topic, influxdb.url, db, max_outage_s=600)
    log = tmp_path / "run.log"
    proc = _daggers("run", str(spec), "--once", "--master", "local[2]", "--state-dir", str(tmp_path), log=log)
    try:
        wait_until(
            "the waiting line",
            lambda: "waiting for the Kafka broker at 127.0.0.1:" in log.read_text(),
            120,
            every_s=0.1,
            proc=proc,
            log=log,
        )
        broker = NoidaBroker(tmp_path / "noida", port)  # the same port, the same data
        broker.start()
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        broker.stop()
    text = log.read_text()
    want = expected_bookings(batch.table.to_pylist())
    assert influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want
    assert f"the Kafka broker at 127.0.0.1:{port} answers now; starting" in text
    assert "stopped after" in text and "3,001 rows read" in text
    # the summary: rows per sink, where, and the windows' range
    rows = sum(1 for _ in want)
    assert (
        f"influx: wrote {rows:,} rows to measurement m in database {db} at {influxdb.url}, "
        "windows ending 2026-03-02 08:01:00 UTC to 2026-03-02 08:05:00 UTC"
    ) in text
    assert not [n for n in NOISE if n in text], text[-3000:]


def test_a_dagger_gives_up_after_max_outage_s_with_one_line_and_a_hint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()  # nothing listens there
    spec = _spec(
        tmp_path, "${RUN_TEST_BROKER:-127.0.0.1:9092}", "bookings", "http://127.0.0.1:9", "db", max_outage_s=4
    )
    done = subprocess.run(
        [sys.executable, "-m", "job.cli", "run", str(spec), "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "RUN_TEST_BROKER": f"127.0.0.1:{port}"},
    )
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert err[0].startswith(
        f"daggers: waiting for the Kafka broker at 127.0.0.1:{port} (topics bookings): unreachable for "
    )
    assert err[0].endswith("giving up after max_outage_s 4 s")
    found = re.fullmatch(
        rf"Source error: cannot reach the Kafka broker at 127.0.0.1:{port} \(waited (\d+) s, "
        r"max_outage_s 4\) \(from \$\{RUN_TEST_BROKER\}\)",
        err[-2],
    )
    assert found and int(found.group(1)) >= 4, err  # (how much longer: the machine's)
    assert err[-1].startswith("hint: start it (`daggers up` starts the local stack)")
    assert len(err) == 3 and not [n for n in NOISE if n in done.stdout + done.stderr]


def test_with_debug_the_error_comes_with_its_trace(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, f"127.0.0.1:{free_port()}", "bookings", "http://127.0.0.1:9", "db", max_outage_s=1)
    done = subprocess.run(
        [sys.executable, "-m", "job.cli", "--debug", "run", str(spec), "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr and "job.errors.SourceError" in done.stderr
    assert done.stderr.strip().splitlines()[-2].startswith("Source error: cannot reach the Kafka broker")


def test_a_missing_topic_gets_a_produce_command_that_works(tansu_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("missing")
    spec = _spec(tmp_path, tansu_broker, topic, "http://127.0.0.1:9", "db", max_outage_s=30)
    done = subprocess.run(
        [sys.executable, "-m", "job.cli", "run", str(spec), "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 2
    title, hint = done.stderr.strip().splitlines()[-2:]
    assert title.startswith(f"Source error: topic '{topic}' does not exist on {tansu_broker}")
    command = hint.removeprefix("hint: create it, or produce to it first: ")
    assert (
        command
        == f"daggers produce --stream booking --topic {topic} --bootstrap {tansu_broker} --count 10000"
    )
    made = subprocess.run(
        [sys.executable, "-m", "job.cli", *shlex.split(command)[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert made.returncode == 0, made.stderr
    consumer = Consumer({"bootstrap.servers": tansu_broker, "group.id": unique("g")})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        # every partition at once, read until none gives anything for 2 s (one wait, not one a partition)
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        total = 0
        while (msg := consumer.poll(2.0)) is not None:
            total += 0 if msg.error() else 1
    finally:
        consumer.close()
    assert total == 10000


def _reading_dagger(name: str, bootstrap: str, influxdb, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``daggers run`` of a bookings dagger on a new topic of ``bootstrap`` (tansu), once it read every event;
    returns (the bookings, the InfluxDB database, the run's log, its process). The caller stops it."""
    topic, db = unique(name), unique("db").replace("-", "_")
    create_topic(bootstrap, topic, 2, kind="tansu")
    influxdb.create_database(db)
    batch, closer = _bookings_with_closer()
    produce(bootstrap, topic, [batch, closer], progress=False)
    spec = _spec(tmp_path, bootstrap, topic, influxdb.url, db, max_outage_s=60)
    log = tmp_path / "run.log"
    proc = _daggers("run", str(spec), "--master", "local[2]", "--state-dir", str(tmp_path), log=log)
    status = tmp_path / "ckpt" / "status.json"
    try:
        wait_until(
            "the dagger to read every event",
            lambda: status.is_file() and '"input_rows": 3001' in status.read_text(),
            600,
            every_s=0.2,
            proc=proc,
            log=log,
        )
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return batch, db, log, proc


def test_ctrl_c_stops_a_running_dagger_with_one_line(tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    batch, db, log, proc = _reading_dagger("ctrl-c", tansu_broker, influxdb, tmp_path)
    try:
        before = len(log.read_text())
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground process group
        code = proc.wait(timeout=180)
        assert code == 0, log.read_text()[before:][-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    # the batch that read everything may log its line after status.json shows it (so after `before`)
    progress = re.compile(r"\d\d:\d\d:\d\d INFO daggers\.runner: \S+: batch \d+: ")
    after = [
        line
        for line in text[before:].splitlines()
        if line.strip() and not line.startswith("influx: wrote") and not progress.match(line)
    ]
    assert len(after) == 1, after
    assert re.fullmatch(
        r"stopped after \d+ batches: 3,001 rows read, 0 late rows dropped, 0 bad records skipped", after[0]
    )
    assert not [n for n in NOISE if n in text], text[-3000:]
    assert influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == expected_bookings(
        batch.table.to_pylist()
    )


def test_an_error_inside_spark_is_one_line_without_java_or_python_traces(tansu_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    topic = unique("bad")
    payloads = list(generate("booking", 50, seed=8, start=T0, duration_s=60).payloads)
    payloads[17] = b"\x0a\xff\xff\xff"  # a length past the end: the executor's decoder fails on it
    producer = Producer({"bootstrap.servers": tansu_broker})
    for value in payloads:
        producer.produce(topic, value, partition=0)
    producer.flush()
    spec = _spec(tmp_path, tansu_broker, topic, "http://127.0.0.1:9", "db", max_outage_s=60)
    text = spec.read_text().replace("bad_records: skip", "bad_records: fail")
    spec.write_text(text[: text.index("sink:\n")] + "sink:\n  type: log\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "job.cli",
            "run",
            str(spec),
            "--once",
            "--master",
            "local[2]",
            "--state-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()
    error = next(i for i, line in enumerate(last) if line.startswith("Bad record: "))
    assert f"cannot decode the record at topic '{topic}' partition 0 offset 17" in last[error]
    assert all(line.startswith("hint: ") for line in last[error + 1 :])
    assert not [n for n in NOISE if n in done.stdout + done.stderr], done.stderr[-3000:]


def _waiting_for_a_broker(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """Start ``daggers run`` on a broker that is not there; return once it says it waits for it."""
    spec = _spec(
        tmp_path, f"127.0.0.1:{free_port()}", "bookings", "http://127.0.0.1:9", "db", max_outage_s=600
    )
    log = tmp_path / "run.log"
    proc = _daggers("run", str(spec), "--state-dir", str(tmp_path), log=log)
    try:
        wait_until(
            "the waiting line",
            lambda: "waiting for the Kafka broker" in log.read_text(),
            120,
            every_s=0.1,
            proc=proc,
            log=log,
        )
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc, log


def test_sigusr1_prints_where_each_thread_is_and_the_command_goes_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc, log = _waiting_for_a_broker(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGUSR1)
        frame = re.compile(r'File ".*/job/sources/preflight.py", line \d+ in _wait_for')

        def dumped() -> bool:  # the stacks, down to the frame of the waiting thread (written line by line)
            dump = log.read_text().split("waiting for the Kafka broker", 1)[1]
            return "most recent call first" in dump and frame.search(dump) is not None

        wait_until("the waiting thread's stack", dumped, 30, every_s=0.1, proc=proc, log=log)
        time.sleep(0.5)  # a handler that dumps, then ends the command, would have done so by now
        assert proc.poll() is None  # it goes on waiting
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_ctrl_c_while_waiting_for_the_broker_is_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc, log = _waiting_for_a_broker(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGUSR1)  # where is it stuck? (its threads' stacks, to the log)
            time.sleep(2)
            raise AssertionError(f"still running 60 s after Ctrl-C:\n{log.read_text()[-6000:]}") from None
        assert code == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = log.read_text().strip().splitlines()
    assert lines[-1] == "interrupted: stopped at once (the next run resumes from the checkpoint)"
    assert not [n for n in NOISE if n in log.read_text()]


def test_a_jvm_killed_under_a_running_dagger_is_one_line_without_traces(
    tansu_broker, influxdb, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    _, _, log, proc = _reading_dagger("jvm-kill", tansu_broker, influxdb, tmp_path)
    try:
        (jvm,) = _java_children(proc.pid)
        before = len(log.read_text())
        os.kill(jvm, signal.SIGKILL)  # as the kernel's OOM killer, or an operator's kill -9
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()[before:]
    assert code != 0, text[-3000:]
    assert not [n for n in NOISE if n in text], text[-3000:]
    assert text.strip(), "no word at all of why the dagger stopped"
