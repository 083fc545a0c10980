"""A shared host process, its daggers and their world (topic, databases, specs) for integration tests: real
broker, InfluxDB and Spark."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.influx_watch import ArrivalWatch, bucketer, subscription_drops
from job.shared.channel import HostFolder
from job.stack.broker import create_topic
from job.stack.process import group_members
from tests.helpers import BOOKINGS_SQL, influx_points, make_spec, produce_step, unique, wait_until
from tests.job.control.test_control_e2e import T0, TAGS, closed

REPO = Path(__file__).resolve().parents[3]


def bookings_text(
    name: str,
    bootstrap: str,
    topic: str,
    influx_url: str,
    db: str,
    checkpoint: Path,
    *,
    bad_records: str = "skip",
    sql: str = BOOKINGS_SQL,
    extra: str = "",
    sink_extra: str = "",
    trigger_s: float = 1.0,
) -> str:
    """A bookings spec text (the helpers' make_spec), with top-level ``extra`` and sink ``sink_extra`` lines."""
    _, text = make_spec(
        name=name,
        bootstrap=bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=sql,
        influx_url=influx_url,
        db=db,
        measurement="bookings",
        checkpoint=checkpoint,
        bad_records=bad_records,
        max_records_per_batch=2500,
        trigger_interval_s=trigger_s,
    )
    text = text.replace("sink:\n", f"{extra}sink:\n")
    return text + sink_extra


@dataclass
class HostProc:
    """A host process on ``folder`` started by a test (it kills what it started)."""

    folder: HostFolder
    master: str = "local[2]"
    popen: subprocess.Popen[bytes] | None = None
    started: list[int] = field(default_factory=list)

    def start(self) -> None:
        self.folder.root.mkdir(parents=True, exist_ok=True)
        with self.folder.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "job.shared.host",
                    str(self.folder.root),
                    "--master",
                    self.master,
                    "--poll",
                    "0.3",
                    "--report",
                    "1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=REPO,
            )
        self.started.append(self.popen.pid)

    def ready(self, timeout: float = 180) -> dict[str, Any]:
        assert self.popen is not None
        pid = self.popen.pid
        return wait_until(
            "the host ready",
            lambda: (h := self.folder.host()) and h.get("pid") == pid and h.get("state") == "ready" and h,
            timeout,
            log=self.folder.log_path,
        )

    def dagger(self, key: str) -> dict[str, Any]:
        return self.folder.state(key) or {}

    def wait_state(
        self, key: str, state: str, timeout: float = 240, token: str | None = None
    ) -> dict[str, Any]:
        return wait_until(
            f"{key} {state}",
            lambda: (
                (d := self.dagger(key)).get("state") == state
                and (token is None or d.get("token") == token)
                and d
            ),
            timeout,
            log=self.folder.log_path,
        )

    def jvm_pid(self) -> int:
        assert self.popen is not None
        pid = (self.folder.host() or {}).get("jvm_pid")
        assert pid in group_members(self.popen.pid), (pid, group_members(self.popen.pid))
        return int(pid)

    def stop(self) -> int | None:
        """SIGTERM (graceful), then kill whatever is left of every host process group started."""
        code = None
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.popen.wait(120)
        self.kill()
        return code

    def kill(self) -> None:
        """SIGKILL every host process group started (the host, its JVM, its fork server) and reap the host:
        a test's clean-up, which checks nothing of a graceful stop (that waits for every query to stop)."""
        for pid in self.started:
            if group_members(pid):
                os.killpg(pid, signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(30)


class ModuleHost(HostProc):
    """One host process that the tests of a module share (one JVM start, not one a test): the first
    :meth:`start` starts it, later ones find it running; each test gives back what it assigned
    (:meth:`leave`) and reads only its own part of the log (:meth:`log`)."""

    since: int = 0

    def start(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            super().start()

    def begin(self) -> None:
        """Mark where the log stands as a test begins."""
        path = self.folder.log_path
        self.since = path.stat().st_size if path.exists() else 0

    def log(self) -> str:
        """Return the host's log written since the test began."""
        with self.folder.log_path.open("rb") as f:
            f.seek(self.since)
            return f.read().decode(errors="replace")

    def leave(self) -> None:
        """Unassign every dagger still assigned and wait until each has stopped: the next test finds the
        host as the first found it, running nothing."""
        keys = list(self.folder.assignments())
        for key in keys:
            self.folder.unassign(key)
        if self.popen is None or self.popen.poll() is not None:
            return
        for key in keys:
            self.wait_state(key, "stopped", timeout=120)
        wait_until("the kills forgotten", lambda: not self.folder.kills(), 60, log=self.folder.log_path)


def windows(influxdb: Any, db: str) -> dict[tuple, int]:
    return influx_points(influxdb, db, "bookings", "num_of_bookings", TAGS)


def status(checkpoint: Path) -> dict[str, Any]:
    from job.query.liveness import read_json

    return read_json(checkpoint / "status.json") or {}


class World:
    """Topics, databases and spec files of one test."""

    def __init__(self, broker: str, influxdb: object, tmp_path: Path) -> None:
        self.broker, self.influxdb, self.tmp = broker, influxdb, tmp_path
        self.topic = unique("shared-bookings")
        create_topic(broker, self.topic, 2)
        self.rows: list[dict] = []
        self.late_rows: list[dict] = []  # sent after their window closed: read and counted, in no window
        self.dbs: dict[str, str] = {}

    def db(self, key: str) -> str:
        if key not in self.dbs:
            self.dbs[key] = unique(f"sh-{key}").replace("-", "_")
            self.influxdb.create_database(self.dbs[key])  # type: ignore[attr-defined]
        return self.dbs[key]

    def checkpoint(self, key: str) -> Path:
        return self.tmp / "daggers" / key / "checkpoint"

    def spec(
        self,
        key: str,
        version: int = 1,
        *,
        topic: str | None = None,
        influx_url: str | None = None,
        **kw: object,
    ) -> Path:
        path = self.tmp / "daggers" / key / f"v{version}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            bookings_text(
                key,
                self.broker,
                topic or self.topic,
                influx_url or self.influxdb.url,  # type: ignore[attr-defined]
                self.db(key),
                self.checkpoint(key),
                **kw,
            )
        )  # type: ignore[arg-type]
        return path

    def step(self, k: int) -> None:
        """Produce events (minute 20*k on) and one later event that closes their windows."""
        self.rows.extend(produce_step(self.broker, self.topic, k, 1500, 70, T0))

    def watch(self, key: str) -> ArrivalWatch:
        """Start counting every point written to ``key``'s database, by second (a subscription of InfluxDB);
        the caller stops it."""
        watch = ArrivalWatch(bucketer((("/^bookings$/", "1s"),)))
        watch.start(self.influxdb.url, self.db(key))  # type: ignore[attr-defined]
        return watch

    def exact(self, key: str, host: HostProc, timeout: float = 240) -> None:
        want = closed(self.rows)
        wait_until(
            f"{key}: every window exactly once",
            lambda: windows(self.influxdb, self.dbs[key]) == want,
            timeout,
            log=host.folder.log_path,
        )
        wait_until(
            f"{key}: every event counted",
            lambda: status(self.checkpoint(key)).get("input_rows") == len(self.rows) + len(self.late_rows),
            60,
            log=host.folder.log_path,
        )


@dataclass
class HostWorld:
    """One test's :class:`World`, the (not yet started) :class:`HostProc` on ``tmp_path / "host"`` and the
    point watches it started with :meth:`watch`."""

    world: World
    host: HostProc
    watches: dict[str, ArrivalWatch] = field(default_factory=dict)

    def watch(self, *keys: str) -> None:
        """Count every point written to each key's database, by second, until the test ends."""
        for key in keys:
            self.watches[key] = self.world.watch(key)

    def written_once(self, key: str, want: Counter[tuple[str, int]], timeout_s: float = 30) -> None:
        """Wait until ``key``'s watch counted exactly ``want`` (its points by bucket) and return.

        Raises AssertionError, naming the buckets, if a bucket got more points than ``want`` (written twice),
        or fewer while InfluxDB forwarded every write to its subscriptions. Fewer with writes InfluxDB did
        not forward (its subscriber queue full on a loaded machine) is what can be seen of the points, not a
        second write: the caller checks the rows themselves in InfluxDB."""
        watch = self.watches[key]

        def got() -> Counter[tuple[str, int]]:
            return Counter({b: n[-1][1] for b, n in list(watch.arrivals.items())})

        try:
            wait_until(
                f"{key}: each row written once",
                lambda: got() == want,
                timeout_s,
                log=self.host.folder.log_path,
            )
        except AssertionError as exc:
            seen = got()
            over = {b: (seen[b], n) for b, n in seen.items() if n > want[b]}
            under = {b: (seen[b], n) for b, n in want.items() if seen[b] < n}
            influx_url = self.world.influxdb.url  # type: ignore[attr-defined]
            dropped = subscription_drops(influx_url) - watch._drops0
            if over or dropped <= 0:
                raise AssertionError(
                    f"{key}: buckets written more than once (seen, wanted): {dict(list(over.items())[:10])}; "
                    f"fewer: {dict(list(under.items())[:10])}; InfluxDB dropped {dropped} subscription writes"
                ) from exc
            warnings.warn(
                f"{key}: {sum(w - s for s, w in under.values())} points not seen: InfluxDB dropped {dropped} "
                "subscription writes (a loaded machine); none was seen twice",
                stacklevel=2,
            )
