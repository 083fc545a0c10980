"""Issue 17's isolation must-shows, on a real broker (tansu), a real InfluxDB and real Spark: several
daggers as streaming queries of ONE shared application host process (``python -m job.shared.host``),
driven through its assignment files.

* One dagger fails on a bad record under ``bad_records: fail``, one on a sink that becomes unreachable
  past its retries, one on a ``udf_file`` function that raises: each stops alone (state failed, its
  error in its state file and status.json); the others' windows stay exactly those of the events.
* Editing one dagger (a new token: stop, then start on the same checkpoint), removing the failed ones
  and deploying a new one leave the others' queries running (same run id) with no gap in their windows.
* SIGKILL of the host's JVM: the host exits with code 3; a new host on the same folder resumes every
  dagger from its own checkpoint with exact windows and totals.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from job.produce.generator import generate
from job.query.liveness import read_json
from job.shared.hosted import LIGHT_POOL
from job.stack.broker import create_topic
from tests.helpers import unique, wait_until
from tests.job.control.test_control_e2e import T0, closed
from tests.job.shared.host_world import HostWorld, status, windows
from tests.job.shared.relay import Relay

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UDF = """from job.functions.user import dagger_function


@dagger_function(returns="string")
def Boom(vehicle_type):
    raise ValueError(f"Boom cannot price vehicle type {vehicle_type}")
"""
UDF_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS num_of_bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
WHERE Boom(vehicle_type) = 'x'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""


def children_of(pid: int) -> list[int]:
    """Return the PIDs of ``pid``'s live child processes."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rfind(")") + 2 :].split()[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_a_failing_dagger_stops_alone_and_edits_leave_the_others_running(
    host_world: HostWorld,
    influxdb,  # type: ignore[no-untyped-def]
    tansu_broker: str,
    tmp_path: Path,
) -> None:
    w, host = host_world.world, host_world.host
    bad_topic = unique("shared-bad")
    create_topic(tansu_broker, bad_topic, 1)
    payloads = list(generate("booking", 50, seed=8, start=T0, duration_s=60).payloads)
    payloads[17] = b"\x0a\xff\xff\xff"  # a length past the end
    producer = Producer({"bootstrap.servers": tansu_broker})
    for value in payloads:
        producer.produce(bad_topic, value, partition=0)
    producer.flush()
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    (tmp_path / "boom.py").write_text(UDF)

    host.start()
    try:
        host.ready()
        w.step(0)
        f = host.folder
        f.assign("one", w.spec("one"), tmp_path, "one-1")
        f.assign("two", w.spec("two", extra="light: true\n"), tmp_path, "two-1")  # in the light pool
        f.assign("bad-record", w.spec("bad-record", topic=bad_topic, bad_records="fail"), tmp_path, "r1")
        f.assign(
            "sink",
            w.spec(
                "sink",
                influx_url=f"http://127.0.0.1:{relay.port}",
                sink_extra="  max_retries: 1\n  timeout_s: 2\n",
            ),
            tmp_path,
            "s1",
        )
        f.assign(
            "udf", w.spec("udf", sql=UDF_SQL, extra=f"udf_file: {tmp_path / 'boom.py'}\n"), tmp_path, "u1"
        )

        # (a) a bad record under bad_records: fail, (c) a UDF that raises: each fails alone
        bad = host.wait_state("bad-record", "failed")
        assert bad["error"].startswith(
            f"Bad record: cannot decode the record at topic '{bad_topic}' partition 0 offset 17"
        ), bad["error"]
        udf = host.wait_state("udf", "failed")
        assert "ValueError: Boom cannot price vehicle type" in udf["error"], udf["error"]
        for key, needle in (("bad-record", "offset 17"), ("udf", "Boom cannot price")):
            st = status(w.checkpoint(key))
            assert st["state"] == "failed" and needle in st["last_error"], st
        for key in ("one", "two", "sink"):
            w.exact(key, host)
        assert {k: host.dagger(k)["state"] for k in ("one", "two", "sink")} == dict.fromkeys(
            ("one", "two", "sink"), "running"
        )
        run_a = read_json(w.checkpoint("one") / "query.json")["run_id"]  # type: ignore[index]
        # every dagger's jobs ran in its own FAIR pool, but the light one's in the light daggers' pool
        # (the host reports every second here: a report may predate the failed dagger's pool, which came last)
        pools = wait_until(
            "the pools",
            lambda: (
                (h := f.host() or {})
                and {"dagger-one", LIGHT_POOL, "dagger-sink", "dagger-udf"} <= set(h.get("pools") or [])
                and h["pools"]
            ),
            30,
        )
        assert "dagger-two" not in pools, pools
        assert host.dagger("two")["pool"] == LIGHT_POOL
        # the running queries' source runners (one each) were forked from the host's fork server, and so
        # were PySpark's daemons of the sources' planning workers (each leads a process group of its own)
        fork = (f.host() or {}).get("fork_server_pid")
        assert fork, f.host()
        seen: list[tuple[list[int], list[int]]] = []

        def runners_and_daemons() -> bool:  # the failed queries' runners exit moments after their query
            children = children_of(int(fork))
            try:
                seen.append((children, [c for c in children if os.getpgid(c) == c]))
            except ProcessLookupError:  # one exited meanwhile
                return False
            return len(children) - len(seen[-1][1]) == 3 and bool(seen[-1][1])

        try:
            wait_until("three source runners", runners_and_daemons, 30)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}: the server's children and the daemons among them: {seen[-1:]}"
            ) from None
        children, daemons = seen[-1]
        names = {c: Path(f"/proc/{c}/comm").read_text().strip() for c in children}
        assert {names[c] for c in children if c not in daemons} == {"python-runner"}, names
        assert {names[c] for c in daemons} <= {"python-daemon", "python-workers"}, (
            names
        )  # the planning, UDF daemons

        # (b) the sink becomes unreachable: past its one retry, that dagger fails alone
        relay.cut()
        w.step(1)
        sink = host.wait_state("sink", "failed")
        assert sink["error"].startswith(
            f"Sink error: giving up writing to InfluxDB at http://127.0.0.1:{relay.port} "
            "after 2 attempts: cannot reach"
        ), sink["error"]
        for key in ("one", "two"):
            w.exact(key, host)

        # edit b (stop, start the new version on its checkpoint), remove the failed ones, deploy c
        f.assign("two", w.spec("two", 2, trigger_s=2.0, extra="light: true\n"), tmp_path, "two-2")
        for key in ("bad-record", "sink", "udf"):
            f.unassign(key)
        deployed = time.monotonic()
        f.assign("three", w.spec("three"), tmp_path, "three-1")
        host.wait_state("two", "running", token="two-2")
        want = closed(w.rows)
        wait_until("c's first point", lambda: windows(influxdb, w.dbs["three"]), 180, log=f.log_path)
        first_point_s = time.monotonic() - deployed
        w.step(2)
        for key in ("one", "two", "three"):
            w.exact(key, host)
        assert len(closed(w.rows)) > len(want) + 300
        # a ran on, untouched: the same query run from the start, never stopped
        assert read_json(w.checkpoint("one") / "query.json")["run_id"] == run_a  # type: ignore[index]
        assert host.dagger("one")["token"] == "one-1" and host.dagger("one")["state"] == "running"
        assert wait_until(
            "the host's daggers", lambda: (f.host() or {}).get("daggers") == ["one", "three", "two"], 30
        )  # sorted
        print(f"\ndeploy into the running host -> first point: {first_point_s:.1f} s")
        assert host.stop() == 0
        for key in ("one", "two", "three"):
            assert host.dagger(key)["state"] == "stopped" and status(w.checkpoint(key))["state"] == "stopped"
    finally:
        relay.cut()


@pytest.mark.fault
def test_sigkill_of_the_jvm_restarts_the_host_and_each_dagger_resumes_exactly(  # type: ignore[no-untyped-def]
    host_world: HostWorld, tmp_path: Path
) -> None:
    w, host = host_world.world, host_world.host
    host.start()
    host.ready()
    for key in ("one", "two"):
        host.folder.assign(key, w.spec(key), tmp_path, f"{key}-1")
    w.step(0)
    for key in ("one", "two"):
        w.exact(key, host)
    w.step(1)  # read in part, or not at all, when the JVM dies
    os.kill(host.jvm_pid(), signal.SIGKILL)
    assert host.popen is not None and host.popen.wait(60) == 3
    lost = host.folder.host() or {}
    assert (lost["state"], lost["error"]) == (
        "exited",
        "the Spark application was lost (its JVM was killed by signal 9 (SIGKILL))",
    ), lost

    host.start()  # what the controller does; the assignments are still there
    host.ready()
    w.step(2)
    for key in ("one", "two"):
        w.exact(key, host)
        assert host.dagger(key)["state"] == "running" and host.dagger(key)["token"] == f"{key}-1"
