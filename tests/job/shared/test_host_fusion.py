"""Fused daggers (``isolation: fused``, :mod:`job.shared.fusion`) in ONE shared host process, on a real
broker (tansu), a real InfluxDB and real Spark, driven through the host's assignment files.

* Three daggers on one topic run as one streaming query; each writes exactly the windows of the events to
  its own database, and has its own ``status.json`` with every event counted.
* A member whose sink becomes unreachable fails alone; the others' windows stay exact.
* A dagger deployed into the group, one edited and one removed: the group's next generation reads the
  topic again from the oldest open window, so the members that stay have every window exactly once (no
  gap, no double), and the new one has every window from where it joined.
* Pass-throughs fuse too, in a group of their own, whose next generation starts where the last stopped.
* HOP windows fuse too, in a group of their own: a new generation leaves out the windows the last one
  wrote (they overlap where it starts reading), so a member that stays has each window once and whole.
* Interval joins fuse too, when they merge into one aggregation: a new generation reads both streams
  again from the join's reach before the oldest open window, and leaves out the windows before it.
* SIGKILL of the JVM: a new host resumes the same generation from its checkpoint, exactly.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.shared.channel import HostFolder
from tests.helpers import influx_points, wait_until
from tests.job.control.test_control_e2e import DELAY_MS, T0, closed
from tests.job.shared.host_world import HostWorld, World, status, windows
from tests.job.shared.relay import Relay

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

FUSED = "isolation: fused\nlight: true\n"
#: not light: a light pass-through's trigger is at least 5 s (job.query.plan.LIGHT_TRIGGER_S), the test's is 1 s
FUSED_EVERY_S = "isolation: fused\n"
WINDOW_S = 60
HOP_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp
FROM data_stream
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), city_id"""


PASS_SQL = """SELECT order_number AS tag_order_number, fare_idr AS fare, rowtime AS window_timestamp
FROM data_stream"""


JOIN_SQL = """SELECT a.city_id AS tag_city_id, count(1) AS pairs,
       TUMBLE_END(a.rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM bookings AS a JOIN later AS b
  ON a.city_id = b.city_id AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND
GROUP BY TUMBLE(a.rowtime, INTERVAL '60' SECOND), a.city_id"""
JOIN_REACH_S = 10


def assign_fused(folder: HostFolder, w: World, tmp_path: Path, keys: tuple[str, ...], **kw: object) -> None:
    """Assign each of ``keys`` a fused bookings spec (token ``<key>-1``)."""
    for key in keys:
        folder.assign(key, w.spec(key, extra=FUSED, **kw), tmp_path, f"{key}-1")


def join_spec(w: World, key: str) -> Path:
    """A fused spec of :data:`JOIN_SQL`: the bookings topic read as two streams, ``bookings`` and ``later``."""
    path = w.spec(key, extra=FUSED, sql=JOIN_SQL)
    text = path.read_text()
    head, rest = text.split("streams:\n", 1)
    block, tail = rest.split("sql: |", 1)
    first = block.replace("table: data_stream", "table: bookings")
    second = block.replace("table: data_stream", "table: later").replace(
        f"group: {key}", f"group: {key}-later"
    )
    path.write_text(f"{head}streams:\n{first}{second}sql: |{tail}")
    return path


def join_pairs(rows: list[dict]) -> dict[tuple, int]:
    """(window end s, city) -> pairs of bookings in one city, the second at most 10 s after the first (a
    booking pairs with itself too), by the first's window."""
    import bisect
    from collections import defaultdict
    from datetime import UTC, datetime

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    micros: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        micros[str(r["city_id"])].append((r["event_timestamp"] - epoch) // timedelta(microseconds=1))
    out: Counter[tuple[int, str]] = Counter()
    for city, times in micros.items():
        times.sort()
        for t in times:
            n = bisect.bisect_right(times, t + JOIN_REACH_S * 1_000_000) - bisect.bisect_left(times, t)
            out[(t // 60_000_000 * 60 + 60, city)] += n
    return dict(out)


def joins_exact(influxdb, db: str, rows: list[dict], since_s: float = 0) -> bool:  # type: ignore[no-untyped-def]
    """Whether every pair window written is exact, and every one final a window ago (from ``since_s`` on)
    is written."""
    got = influx_points(influxdb, db, "bookings", "pairs", ["tag_city_id"])
    every = join_pairs(rows)
    final_s = watermark_of(rows) - JOIN_REACH_S - WINDOW_S
    want = {k: v for k, v in every.items() if k[0] <= final_s and k[0] - WINDOW_S >= since_s}
    return (
        bool(want)
        and all(every.get(k) == v and k[0] - WINDOW_S >= since_s for k, v in got.items())
        and all(got.get(k) == v for k, v in want.items())
    )


def rows_of(influxdb, db: str) -> set[tuple]:  # type: ignore[no-untyped-def]
    return set(influx_points(influxdb, db, "bookings", "fare", ["tag_order_number"]))


def passed(rows: list[dict]) -> set[tuple]:
    return {(int(r["event_timestamp"].timestamp()), str(r["order_number"])) for r in rows}


def group_file(folder: HostFolder, member: str = "fa") -> dict:
    for path in (folder.root / "groups").glob("*/group.json"):
        data = json.loads(path.read_text())
        if member in data["members"]:
            return data
    raise AssertionError(f"no group has {member}")


def hop_windows(rows: list[dict], watermark_s: float) -> dict[tuple, int]:
    """(window end s, city_id) -> bookings of every 3-minute window, every minute, closed by ``watermark_s``."""
    out: Counter[tuple[int, str]] = Counter()
    for r in rows:
        ts = int(r["event_timestamp"].timestamp())
        for start in range((ts - 180) // 60 * 60 + 60, ts + 1, 60):
            if start + 180 <= watermark_s:
                out[(start + 180, str(r["city_id"]))] += 1
    return dict(out)


def hop_points(influxdb, db: str) -> dict[tuple, int]:  # type: ignore[no-untyped-def]
    return influx_points(influxdb, db, "bookings", "bookings", ["tag_city_id"])


def send_late(w: World, records: list[tuple[int, int]]) -> None:
    """Send bookings (status, city) stamped 30 s into the first step's first window, long closed, to one
    partition; count them as late (a pass-through passes them).

    Their Kafka timestamp is the time they are sent on the test's clock, the event time: a window period
    after the newest event sent. Stamped with the wall clock instead (months after every event), they made
    a source that reads at window close (a light dagger's, job.sources.pacing) take each later record for
    an older one and wait a window period of wall time (60 s) before each read; stamped with their own event
    time, it waited that long to read them."""
    from confluent_kafka import Producer

    from job.schema import default_registry

    cls = default_registry().message_class("daggers.events.BookingLog")
    producer = Producer({"bootstrap.servers": w.broker})
    sent_at = max(r["event_timestamp"] for r in w.rows) + timedelta(seconds=WINDOW_S)
    stamp_ms = int(sent_at.timestamp() * 1000)
    for i, (state, city) in enumerate(records):
        msg = cls(
            order_number=f"late-{i}",
            city_id=city,
            vehicle_type=2,
            status=state,
            pickup_lat=-6.2,
            pickup_long=106.8,
        )
        msg.event_timestamp.FromDatetime(T0 + timedelta(seconds=30))
        producer.produce(w.topic, msg.SerializeToString(), partition=0, timestamp=stamp_ms)
        w.late_rows.append({"order_number": msg.order_number, "event_timestamp": T0 + timedelta(seconds=30)})
    producer.flush()


def watermark_of(rows: list[dict]) -> float:
    return max(r["event_timestamp"].timestamp() for r in rows) - DELAY_MS / 1000


def test_fused_daggers_share_one_query_and_each_stays_exact(
    host_world: HostWorld,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    w, host = host_world.world, host_world.host
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    f = host.folder
    try:
        w.step(0)
        # assigned before the host starts: its first round sees every member, so each group starts in one
        # generation (assigned one by one into a running host, a group may start again as members arrive)
        assign_fused(f, w, tmp_path, ("fa", "fb"))
        f.assign(
            "fs",
            w.spec(
                "fs",
                extra=FUSED,
                influx_url=f"http://127.0.0.1:{relay.port}",
                sink_extra="  max_retries: 1\n  timeout_s: 2\n",
            ),
            tmp_path,
            "fs-1",
        )
        f.assign("fh", w.spec("fh", extra=FUSED, sql=HOP_SQL), tmp_path, "fh-1")
        f.assign("fp", w.spec("fp", extra=FUSED_EVERY_S, sql=PASS_SQL), tmp_path, "fp-1")
        f.assign("fj", join_spec(w, "fj"), tmp_path, "fj-1")
        host.start()
        host.ready()
        for key in ("fa", "fb", "fs"):
            w.exact(key, host)
        wait_until(
            "fh: every HOP window",
            lambda: hop_points(influxdb, w.dbs["fh"]) == hop_windows(w.rows, watermark_of(w.rows)),
            120,
            log=f.log_path,
        )
        assert group_file(f, "fh")["members"] == {"fh": "fh-1"}
        wait_until(
            "fp: every event", lambda: rows_of(influxdb, w.dbs["fp"]) == passed(w.rows), 60, log=f.log_path
        )
        assert group_file(f, "fp")["members"] == {"fp": "fp-1"}
        wait_until(
            "fj: every pair window", lambda: joins_exact(influxdb, w.dbs["fj"], w.rows), 120, log=f.log_path
        )
        assert group_file(f, "fj")["members"] == {"fj": "fj-1"}
        # one query for the three: one group, one generation, each member's state names it
        group = group_file(f)
        assert group["generation"] == 1 and group["members"] == {"fa": "fa-1", "fb": "fb-1", "fs": "fs-1"}
        states = {k: host.dagger(k) for k in ("fa", "fb", "fs")}
        assert {s["state"] for s in states.values()} == {"running"}
        assert len({s["group"] for s in states.values()}) == 1, states
        ids = {json.loads((w.checkpoint(k) / "query.json").read_text())["id"] for k in ("fa", "fb", "fs")}
        assert len(ids) == 1, ids

        # three records of a closed window, two of one key (Spark's state operator drops one row for them)
        # and one the members' WHERE drops: the group counts its stream's records, before the WHERE
        send_late(w, [(4, 4), (4, 4), (5, 4)])
        for key in ("fa", "fb"):
            wait_until(
                f"{key}: 3 late records",
                lambda key=key: (
                    (
                        status(w.checkpoint(key)).get("late_rows_dropped"),
                        status(w.checkpoint(key)).get("late_before_filter"),
                    )
                    == (3, True)
                ),
                60,
                log=f.log_path,
            )

        # fs's sink becomes unreachable: it fails alone
        relay.cut()
        w.step(1)
        failed = host.wait_state("fs", "failed")
        assert failed["error"].startswith(
            f"Sink error: giving up writing to InfluxDB at http://127.0.0.1:{relay.port}"
        ), failed
        assert status(w.checkpoint("fs"))["state"] == "failed"
        for key in ("fa", "fb"):
            w.exact(key, host)
        # six minutes of events in a row, no closer: the HOP windows that end by the watermark are written,
        # and the next generation's start falls inside windows already written
        dense = generate(
            "booking", 600, seed=90, start=T0 + timedelta(minutes=40), duration_s=360, first_index=50_000
        )
        produce(w.broker, w.topic, [dense], progress=False)
        w.rows.extend(dense.table.to_pylist())
        for key in ("fa", "fb"):
            w.exact(key, host)
        wait_until(
            "fh: every HOP window",
            lambda: hop_points(influxdb, w.dbs["fh"]) == hop_windows(w.rows, watermark_of(w.rows)),
            120,
            log=f.log_path,
        )
        wait_until(
            "fp: every event",
            lambda: rows_of(influxdb, w.dbs["fp"]) == passed(w.rows + w.late_rows),
            60,
            log=f.log_path,
        )
        # the group went on without it (a new generation, from the oldest open window)
        before = closed(w.rows)
        watermark_s = max(r["event_timestamp"].timestamp() for r in w.rows) - DELAY_MS / 1000
        joined_s = int(watermark_s) // WINDOW_S * WINDOW_S

        # deploy fc, edit fb (a new token), remove fs: a new generation; fa and fb lose no window;
        # fh2 joins fh's HOP group, whose new generation reads again windows fh has written in part
        f.assign("fc", w.spec("fc", extra=FUSED), tmp_path, "fc-1")
        hop_joined_s = watermark_of(w.rows)
        f.assign("fh2", w.spec("fh2", extra=FUSED, sql=HOP_SQL), tmp_path, "fh2-1")
        # fp2 joins fp's pass-through group, whose next generation starts where the last one stopped
        f.assign("fp2", w.spec("fp2", extra=FUSED_EVERY_S, sql=PASS_SQL), tmp_path, "fp2-1")
        f.assign("fb", w.spec("fb", 2, extra=FUSED), tmp_path, "fb-2")
        # fj2 joins fj's group: its new generation reads both streams again from the join's reach before the
        # oldest open window, and leaves out the windows that start before it
        f.assign("fj2", join_spec(w, "fj2"), tmp_path, "fj2-1")
        f.unassign("fs")
        host.wait_state("fb", "running", token="fb-2")
        wait_until(
            "the group's new members",
            lambda: group_file(f)["members"] == {"fa": "fa-1", "fb": "fb-2", "fc": "fc-1"},
            120,
            log=f.log_path,
        )
        group = group_file(f)
        assert group["start_ms"] == joined_s * 1000, (group, joined_s)
        host.wait_state("fp2", "running")
        assert group_file(f, "fp")["generation"] == 2
        passed_before = len(w.rows)  # what fp's first generation read: fp2 starts after it
        w.step(3)  # minute 60 on: after the six minutes from minute 40
        for key in ("fa", "fb"):
            w.exact(key, host)
        want_c = {k: v for k, v in closed(w.rows).items() if k[0] - WINDOW_S >= joined_s}
        assert want_c and len(want_c) < len(closed(w.rows))
        wait_until(
            "fc: every window since it joined",
            lambda: windows(influxdb, w.dbs["fc"]) == want_c,
            120,
            log=f.log_path,
        )
        assert group_file(f, "fh")["generation"] == 2
        hop_all = hop_windows(w.rows, watermark_of(w.rows))
        wait_until(
            "fh: every HOP window once, whole",
            lambda: hop_points(influxdb, w.dbs["fh"]) == hop_all,
            120,
            log=f.log_path,
        )
        hop_new = {k: v for k, v in hop_all.items() if k[0] > hop_joined_s}
        assert hop_new and len(hop_new) < len(hop_all)
        wait_until(
            "fh2: every HOP window since it joined",
            lambda: hop_points(influxdb, w.dbs["fh2"]) == hop_new,
            120,
            log=f.log_path,
        )
        wait_until(
            "fp: every event",
            lambda: rows_of(influxdb, w.dbs["fp"]) == passed(w.rows + w.late_rows),
            60,
            log=f.log_path,
        )
        wait_until(
            "fp2: every event since it joined",
            lambda: rows_of(influxdb, w.dbs["fp2"]) == passed(w.rows[passed_before:]),
            60,
            log=f.log_path,
        )
        assert group_file(f, "fp")["generation"] == 2 and status(w.checkpoint("fp"))["input_rows"] == len(
            w.rows
        ) + len(w.late_rows)
        join_group = group_file(f, "fj")
        assert join_group["generation"] == 2 and join_group["members"] == {"fj": "fj-1", "fj2": "fj2-1"}
        wait_until(
            "fj: every pair window once",
            lambda: joins_exact(influxdb, w.dbs["fj"], w.rows),
            120,
            log=f.log_path,
        )
        wait_until(
            "fj2: every pair window since it joined",
            lambda: joins_exact(influxdb, w.dbs["fj2"], w.rows, join_group["start_ms"] / 1000),
            120,
            log=f.log_path,
        )
        # fs stays failed (removed, as a failed dagger of its own would be), with the windows it wrote before
        assert host.dagger("fs")["state"] == "failed"
        written = windows(influxdb, w.dbs["fs"])
        assert written and written == {k: v for k, v in before.items() if k in written}

        # SIGKILL of the JVM: a new host resumes the same generation, exactly
        generation = group_file(f)["generation"]
        w.step(4)
        os.kill(host.jvm_pid(), signal.SIGKILL)
        assert host.popen is not None and host.popen.wait(60) == 3
        host.start()
        host.ready()
        w.step(5)
        for key in ("fa", "fb"):
            w.exact(key, host)
        want_c = {k: v for k, v in closed(w.rows).items() if k[0] - WINDOW_S >= joined_s}
        wait_until(
            "fc: exact after the restart",
            lambda: windows(influxdb, w.dbs["fc"]) == want_c,
            120,
            log=f.log_path,
        )
        wait_until(
            "fj: exact after the restart",
            lambda: joins_exact(influxdb, w.dbs["fj"], w.rows),
            120,
            log=f.log_path,
        )
        assert group_file(f)["generation"] == generation
        assert host.stop() == 0
        for key in ("fa", "fb", "fc"):
            assert host.dagger(key)["state"] == "stopped" and status(w.checkpoint(key))["state"] == "stopped"
    finally:
        relay.cut()
