"""Real faults in a real world, and how long until the health model shows them.

A :class:`HealthWorld` is a tansu broker, an InfluxDB, a SQLite registry with cluster ``a-jkt``
(``local[2]``) and its controller (``daggers controller``, a separate process); daggers are shared (one
shared application host, one Spark application). Each fault function makes the fault real (SIGSTOP of the
broker, an InfluxDB stopped, a JVM killed, the controller SIGKILLed, ...) and returns a :class:`Detection`:
the seconds until ``daggers dagger list --json`` (a separate process, as a script would run it) showed the
expected state, or None when it did not within the deadline.

Used by ``bench/bench_health.py`` (the detection times) and ``tests/job/control/test_health_faults.py``.
The thresholds are shortened by ``DAGGERS_HEALTH_*`` (:data:`HEALTH_ENV`) so a fault is seen in seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from job.chaos.faults import signal_group
from job.control import ControlPlane, Registry
from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.broker import TansuBroker, create_topic
from job.stack.errors import StackError
from job.stack.influx import InfluxServer, create_database
from job.stack.ports import free_port, free_ports
from job.stack.process import group_members

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
#: The health model's thresholds in this world (seconds and records), shorter than the defaults.
HEALTH_ENV = {
    "DAGGERS_HEALTH_STALL_AFTER_S": "20",
    "DAGGERS_HEALTH_CONTROLLER_SILENT_S": "10",
    "DAGGERS_HEALTH_LAG_WINDOW_S": "20",
    "DAGGERS_HEALTH_LAG_GROWTH_MIN": "300",
    "DAGGERS_HEALTH_CATCHING_UP_LAG": "1000000",
    "DAGGERS_HEALTH_CRASH_WINDOW_S": "30",
    "DAGGERS_HEALTH_FIGURE_FRESH_S": "15",
    "DAGGERS_HEALTH_START_TIMEOUT_S": "600",
}
BOOKINGS_SQL = """SELECT
  city_id AS tag_city_id,
  COUNT(*) AS num_of_bookings,
  TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""


def spec_text(
    name: str,
    topic: str,
    *,
    influx: str = "${DAGGERS_INFLUX}",
    max_records: int = 2500,
    trigger_s: float = 1.0,
) -> str:
    """A shared bookings dagger: counts per city and minute into database ``health``; a failed write is
    retried once (so a sink that is down fails the dagger in seconds)."""
    from tests.helpers import booking_spec

    return booking_spec(
        name,
        topic=topic,
        bootstrap="${DAGGERS_BOOTSTRAP}",
        group=f"dagger-{name}",
        stream=f"    start_from: earliest\n    max_records_per_batch: {max_records}\n",
        sql=BOOKINGS_SQL,
        settings=f"watermark_delay_ms: 30000\nparallelism: 2\ntrigger_interval_s: {trigger_s}\nisolation: shared\n",
        sink=f"sink:\n  type: influx\n  url: {influx}\n  database: health\n  measurement: bookings\n"
        "  max_retries: 1\n  max_backoff_s: 1\n",
    )


@dataclass
class Detection:
    """One fault: the state expected, the seconds until ``dagger list --json`` showed it (None: not within
    ``deadline_s``), and the row it showed last."""

    fault: str
    expected: str
    deadline_s: float
    seconds: float | None
    row: dict[str, Any] = field(default_factory=dict)

    @property
    def detected(self) -> bool:
        """True when the expected state was shown within the deadline."""
        return self.seconds is not None


class HealthWorld:
    """The world of the fault runs (see the module docstring); :meth:`close` stops everything it started."""

    def __init__(self, root: Path, backoff: tuple[float, float] = (4.0, 16.0)) -> None:
        """``backoff``: the controller's first restart wait and its longest (it doubles in between)."""
        self.root = Path(root)
        self.backoff = backoff
        self.root.mkdir(parents=True, exist_ok=True)
        self.broker = TansuBroker(self.root / "broker", free_port())
        port, bind = free_ports(2)
        self.influx = InfluxServer(self.root / "influx", port, bind)
        self.url = f"sqlite:///{self.root / 'registry.db'}"
        self.env = {**os.environ, **HEALTH_ENV, "DAGGERS_USER": "alice", "DAGGERS_REGISTRY": self.url}
        self.controller: subprocess.Popen[bytes] | None = None
        self.registry: Registry | None = None
        self.pids: set[int] = set()  # dagger and host process groups seen, killed at the end

    # ---- the world ----------------------------------------------------------------------------

    def start(self) -> HealthWorld:
        """Start the broker, InfluxDB, the registry and the controller."""
        from tests.job.control.control_seed import seed

        for attempt in range(3):  # another program may take a port between its choice and the bind
            try:
                self.broker.start()
                self.influx.start()
                break
            except StackError as exc:
                if attempt == 2 or "exited" not in str(exc):
                    raise
                self.broker.stop()
                self.broker = TansuBroker(self.root / "broker", free_port())
                port, bind = free_ports(2)
                self.influx = InfluxServer(self.root / "influx", port, bind)
        create_database(self.influx.url, "health")
        self.registry = Registry(self.url)
        seed(self.registry, kafka=self.broker.bootstrap, influx=self.influx.url, master="local[2]")
        self.start_controller()
        return self

    def start_controller(self) -> None:
        """Start ``daggers controller --cluster a-jkt`` (poll 0.5 s; by default the first restart after 4 s,
        then 8, then 16 each time: a crash loop lasts about a minute before the controller gives up)."""
        log = (self.root / "controller.log").open("ab")
        self.controller = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "controller",
                "--cluster",
                "a-jkt",
                "--registry",
                self.url,
                "--state-dir",
                str(self.root / "state"),
                "--poll",
                "0.5",
                "--backoff",
                str(self.backoff[0]),
                "--max-backoff",
                str(self.backoff[1]),
                "--no-standby",
                "--stop-daggers-on-exit",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
            env=self.env,
        )

    def kill_controller(self) -> None:
        """SIGKILL the controller (its daggers keep running)."""
        assert self.controller is not None
        self.controller.kill()
        self.controller.wait(30)
        self.controller = None

    def close(self, graceful: bool = True) -> None:
        """Stop the controller (and with it the daggers), then every process left, the broker and InfluxDB.

        ``graceful=False``: SIGKILL the controller and the daggers' process groups instead of waiting for
        their stops (after a broker that is down, a stop waits out the source's fetch)."""
        if self.controller is not None and not graceful:
            with contextlib.suppress(Exception):
                self.rows_here()  # note the process groups running now, and every host's
            for marker in (self.root / "state").glob("controller/*/shared/*/host.json"):
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    self.pids.add(int(json.loads(marker.read_text())["pid"]))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.controller.pid, signal.SIGKILL)
            self.controller.wait(30)
            self.controller = None
        if self.controller is not None:
            self.controller.send_signal(signal.SIGTERM)
            try:
                self.controller.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.controller.pid, signal.SIGKILL)
                self.controller.wait(10)
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            os.kill(self.broker.process.pid or 0, signal.SIGCONT)
        for server in (self.broker, self.influx):
            with contextlib.suppress(Exception):
                server.stop(10)
        if self.registry is not None:
            self.registry.close()

    @property
    def plane(self) -> ControlPlane:
        """Alice's control plane (in this process; judged with this process's DAGGERS_HEALTH_*)."""
        assert self.registry is not None
        return ControlPlane(self.registry, "alice")

    # ---- daggers and events -------------------------------------------------------------------

    def topic(self, name: str, partitions: int = 2) -> str:
        """Create topic ``name`` on the broker; return it."""
        create_topic(self.broker.bootstrap, name, partitions, kind="tansu")
        return name

    def create(self, name: str, topic: str, **spec: Any) -> str:
        """Create and deploy shared dagger ``name`` on ``topic``; return its ref."""
        return self.plane.create("a-jkt", spec_text(name, topic, **spec), deploy=True).ref

    def produce(
        self,
        topic: str,
        count: int,
        *,
        seed: int,
        start: datetime,
        duration_s: float,
        rate: float | None = None,
    ) -> None:
        """Produce ``count`` bookings with event times from ``start`` over ``duration_s`` (at ``rate``/s)."""
        produce(
            self.broker.bootstrap,
            topic,
            generate("booking", count, seed=seed, start=start, duration_s=duration_s),
            rate=rate,
            progress=False,
        )

    # ---- what a script sees -------------------------------------------------------------------

    def cli(self, *args: str) -> Any:
        """Run ``daggers ARGS --json`` as alice in a new process; return its JSON."""
        out = subprocess.run(
            [sys.executable, "-m", "job.cli", *args, "--json"],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            timeout=120,
            check=False,
        )
        try:
            return json.loads(out.stdout)
        except ValueError:
            raise AssertionError(f"daggers {' '.join(args)}: {out.stdout!r} {out.stderr[-2000:]!r}") from None

    def rows(self) -> dict[str, dict[str, Any]]:
        """Return ``daggers dagger list --json`` by dagger name (and note their process groups)."""
        return self._noted(self.cli("dagger", "list"))

    def rows_here(self) -> dict[str, dict[str, Any]]:
        """Return what :meth:`rows` would, computed in this process (its DAGGERS_HEALTH_* must be
        :data:`HEALTH_ENV`, as the CLI's are)."""
        return self._noted(
            json.loads(json.dumps([v.to_dict() for v in self.plane.daggers(None, None)], default=str))
        )

    def _noted(self, listed: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Return the listed daggers by name; note their process groups (killed at the end)."""
        rows = {d["name"]: d for d in listed}
        self.pids.update(d["pid"] for d in rows.values() if d.get("pid"))
        return rows

    def wait(
        self,
        fault: str,
        name: str,
        expected: str | Iterable[str],
        deadline_s: float,
        also: Callable[[dict[str, Any]], bool] = lambda row: True,
        during: Callable[[], object] | None = None,
        transient: bool = False,
    ) -> Detection:
        """Return how long until dagger ``name``'s health state is ``expected`` (one of them) and ``also(row)``;
        ``during`` is called at once when it is (while the fault lasts, for other surfaces to be looked at).

        ``transient``: the state may last only seconds (a crash whose restart is quick), less than a CLI
        process takes on a busy machine; it is looked for here every 0.2 s, and ``dagger list --json`` must
        then show ``also`` (the evidence that stays: a restart counted, its error), in whatever state."""
        want = {expected} if isinstance(expected, str) else set(expected)

        def shows(row: dict[str, Any]) -> bool:
            return row.get("health", {}).get("state") in want and also(row)

        started = time.monotonic()
        row: dict[str, Any] = {}
        while time.monotonic() - started < deadline_s:
            # Looked at here first (a few ms), then in a CLI process when it shows: each `daggers` process
            # costs ~1 core-s, and a fault is waited on for minutes (140 of them were 7% of the suite's CPU).
            row = self.rows_here().get(name, {})
            if transient and shows(row):
                seen_s = round(time.monotonic() - started, 1)
                row = self.rows().get(name, {})
                if also(row):
                    return Detection(fault, "/".join(sorted(want)), deadline_s, seen_s, row)
            elif shows(row) and shows(row := self.rows().get(name, {})):
                if during is not None:
                    during()
                return Detection(
                    fault, "/".join(sorted(want)), deadline_s, round(time.monotonic() - started, 1), row
                )
            time.sleep(0.2 if transient else 0.5)
        return Detection(fault, "/".join(sorted(want)), deadline_s, None, row)

    def host_pids(self) -> tuple[int, list[int]]:
        """Return the shared host's pid (the daggers' recorded pid) and the pids of its JVMs."""
        pid = next(d["pid"] for d in self.rows().values() if d.get("pid"))
        jvms = [p for p in group_members(pid) if p != pid and "java" in _cmdline(p)]
        return pid, jvms


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---- the faults ----------------------------------------------------------------------------------


def first_running(w: HealthWorld, name: str = "steady") -> Detection:
    """Create dagger ``name`` on a new topic with 2,000 bookings; wait until it runs with figures."""
    topic = w.topic(f"{name}-bookings")
    w.produce(topic, 2000, seed=1, start=T0, duration_s=240)
    w.create(name, topic)
    return w.wait("first start", name, "running", 300, lambda r: r["progress"].get("input_rows") == 2000)


def stopped(w: HealthWorld, name: str = "steady") -> Detection:
    """Stop the dagger: ``stopped``, with no figures."""
    w.cli("dagger", "stop", name)
    return w.wait(
        "dagger stopped",
        name,
        "stopped",
        60,
        lambda r: (
            r["actual_state"] == "stopped"
            and (r["health"]["rows_per_s"], r["health"]["lag"], r["health"]["batch_ms"]) == (None,) * 3
        ),
    )


def redeployed(w: HealthWorld, name: str = "steady") -> Detection:
    """Deploy the dagger again: ``running``."""
    w.cli("dagger", "deploy", name)
    return w.wait("deployed again", name, "running", 240)


def crash_looping(
    w: HealthWorld, name: str = "broken", during: Callable[[], object] | None = None
) -> Detection:
    """A dagger whose sink is an InfluxDB that is not there: it crashes at every start (detected once it
    was restarted twice: from then on it is crash-looping until its controller gives up)."""
    topic = w.topic(f"{name}-bookings")
    w.produce(topic, 200, seed=2, start=T0, duration_s=200)
    w.create(name, topic, influx=f"http://127.0.0.1:{free_port()}")
    return w.wait(
        "crash-looping dagger", name, "crash-looping", 240, lambda r: r["restarts"] >= 2, during=during
    )


def failed_after_retries(w: HealthWorld, name: str = "broken") -> Detection:
    """The crash-looping dagger, once its controller gave up (5 crashes in a row): ``failed``."""
    return w.wait("gave up restarting", name, "failed", 300)


def sink_down(w: HealthWorld, name: str = "steady", during: Callable[[], object] | None = None) -> Detection:
    """Stop InfluxDB and close new windows: the writes fail past their retries and the dagger crash-loops."""
    w.influx.stop(10)
    w.produce(f"{name}-bookings", 100, seed=3, start=T0 + timedelta(minutes=6), duration_s=30)
    return w.wait("sink down past its retries", name, "crash-looping", 180, during=during)


def sink_back(w: HealthWorld, name: str = "steady") -> Detection:
    """Start InfluxDB again: the dagger runs again."""
    w.influx.start()
    return w.wait("sink back", name, "running", 240)


def broker_paused(
    w: HealthWorld, name: str = "steady", during: Callable[[], object] | None = None
) -> Detection:
    """SIGSTOP the broker: the dagger's source hangs and it reports nothing: ``stalled``. ``during`` is called
    once it is detected, before the broker is resumed (SIGCONT)."""
    pid = w.broker.process.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        return w.wait("source stalled (broker SIGSTOP)", name, "stalled", 120, during=during)
    finally:
        os.kill(pid, signal.SIGCONT)


def lag_growing(w: HealthWorld, name: str = "slow", during: Callable[[], object] | None = None) -> Detection:
    """A dagger that reads at most 50 records a trigger of 2 s while 400 events/s arrive: ``lagging``."""
    topic = w.topic(f"{name}-bookings")
    w.create(name, topic, max_records=50, trigger_s=2.0)
    w.produce(topic, 100, seed=4, start=T0, duration_s=10)
    w.wait("slow dagger started", name, "running", 300)
    stop = threading.Event()

    def feed() -> None:
        i = 0
        while not stop.is_set():
            w.produce(topic, 400, seed=100 + i, start=T0 + timedelta(seconds=10 + i), duration_s=1)
            i += 1
            stop.wait(1.0)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        return w.wait("lag growing", name, "lagging", 180, during=during)
    finally:
        stop.set()
        feeder.join(30)


def host_jvm_killed(w: HealthWorld, name: str = "steady") -> Detection:
    """SIGKILL the shared host's JVM: the dagger's run ends and it is restarted (crash-looping on its
    restart, then running)."""
    _pid, jvms = w.host_pids()
    assert jvms, "no JVM under the shared host"
    before = w.rows()[name]["restarts"]
    for jvm in jvms:
        os.kill(jvm, signal.SIGKILL)
    return w.wait(
        "shared host JVM killed",
        name,
        ("crash-looping", "unknown", "stalled"),
        120,
        lambda r: r["restarts"] > before,
        transient=True,
    )


def host_killed(w: HealthWorld, name: str = "steady") -> Detection:
    """SIGKILL the shared host process (its group): the dagger crashed and is restarted."""
    w.wait("running before the host is killed", name, "running", 300)
    pid, _ = w.host_pids()
    before = w.rows()[name]["restarts"]
    assert signal_group(pid, signal.SIGKILL), f"no process group {pid}"  # the chaos tool's fault
    return w.wait(
        "shared host killed",
        name,
        ("crash-looping", "unknown"),
        120,
        lambda r: r["restarts"] > before,
        transient=True,
    )


def controller_killed(
    w: HealthWorld, name: str = "steady", during: Callable[[], object] | None = None
) -> Detection:
    """SIGKILL the controller: its daggers are ``unknown`` once its heartbeat is 10 s old."""
    w.wait("running before the controller is killed", name, "running", 300)
    w.kill_controller()
    return w.wait("controller killed", name, "unknown", 60, during=during)


def controller_back(w: HealthWorld, name: str = "steady") -> Detection:
    """Start the controller again: it adopts the running dagger."""
    w.start_controller()
    return w.wait("controller back", name, "running", 120)


def late_events(w: HealthWorld, name: str = "steady") -> Detection:
    """A surge of 500 events an hour older than the watermark: dropped as late, counted, and the dagger
    stays ``running``."""
    before = int(w.rows()[name]["progress"].get("late_rows_dropped") or 0)
    w.produce(f"{name}-bookings", 500, seed=5, start=T0 - timedelta(hours=1), duration_s=60)
    return w.wait(
        "late events dropped", name, "running", 120, lambda r: int(r["health"]["late_rows_dropped"]) > before
    )


def broker_down(w: HealthWorld, name: str = "steady") -> Detection:
    """Stop the broker (for good: tansu keeps its data in memory): the dagger cannot read; its cluster's
    probe says the brokers are down."""
    w.broker.stop(10)
    return w.wait("broker down", name, ("stalled", "crash-looping", "failed"), 180)
