"""A registry for console tests with pinned times, so screens (and their SVG snapshots) are the same
on every run: team-a has 20 created daggers and one running dagger with progress, samples and a past
error on cluster a-jkt (healthy, controller alive); team-b has one dagger on b-jkt."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import update
from textual.pilot import Pilot

from job.control import ControlPlane, Registry
from job.control.models import (
    AuditEntry,
    Cluster,
    Dagger,
    DaggerStatus,
    DaggerVersion,
    DataCentre,
    Sample,
    Team,
    User,
)
from tests.job.control.control_seed import bookings_spec, seed

T = 1_772_445_600.0  # 2026-03-02 10:00:00 UTC
NOW = T + 60
SNAPSHOTS = Path(__file__).with_name("snapshots")

HEALTH = {
    "ok": True,
    "checked_at": T + 50,
    "spark": {
        "ok": True,
        "mode": "standalone",
        "status": "ALIVE",
        "workers_alive": 2,
        "workers": 2,
        "cores": 8,
        "cores_used": 3,
        "memory_mb": 16384,
        "memory_used_mb": 6144,
    },
    "kafka": {"ok": True, "brokers": 3, "topics": 12, "partitions": 96},
    "influx": {"ok": True, "version": "1.6.7"},
    "daggers": {"running": 1, "total": 21},
}


def copy_registry(source: Path, target: Path) -> Registry:
    """Return a registry on a copy (``target``, an SQLite file) of the SQLite registry file ``source``: a
    world :func:`build` filled once for a module, fresh for each test that may change it. The copy goes
    through SQLite's backup API, so a write-ahead log not yet folded into ``source`` is copied too."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)
    return Registry(f"sqlite:///{target}")


def build(registry: Registry, *, kafka: str = "127.0.0.1:9", influx: str = "http://127.0.0.1:9") -> None:
    """Fill ``registry`` (see the module docstring)."""
    seed(registry, kafka=kafka, influx=influx, master="spark://gw-1:7077")
    alice, bob = ControlPlane(registry, "alice"), ControlPlane(registry, "bob")
    for i in range(20):
        alice.create("a-jkt", bookings_spec(f"dag-{i:02d}"))
    live = alice.create("a-jkt", bookings_spec("live-bookings"), deploy=True)
    bob.create("b-jkt", bookings_spec("b-secret"))
    with registry.session() as s:
        st = s.get(DaggerStatus, live.id)
        assert st is not None
        st.actual_state, st.running_version, st.running_generation = "running", 1, 0
        st.pid, st.host, st.started_at, st.restarts = 4242, "gw-1", T - 3600, 1
        st.last_error = "Sink error: InfluxDB answered 503 (restarted)"
        st.progress = {
            "batches": 720,
            "input_rows": 3_456_000,
            "input_rows_per_s": 4800.0,
            "processed_rows_per_s": 9100.0,
            "batch_duration_ms": 1350,
            "late_rows_dropped": 12,
            "bad_records": 0,
            "watermark": "2026-03-02T09:59:40.000Z",
            "updated_at": T + 58,
        }
        st.lag, st.lag_at, st.checkpoint, st.updated_at = (
            1200,
            T + 57,
            "/srv/daggers/1-live/checkpoint-1",
            T + 58,
        )
        # a batch every 2 s up to the last report (rows read in all as the progress says), each with a lag read
        rates = [4000 + 1000 * math.sin(i / 3) for i in range(30)]
        s.add_all(
            Sample(
                dagger_id=live.id,
                at=T + 58 - 2 * (29 - i),
                input_rows=3_456_000 - int(sum(2 * r for r in rates[i + 1 :])),
                input_rows_per_s=rates[i],
                processed_rows_per_s=9000.0,
                batch_duration_ms=int(1200 + 300 * math.cos(i / 4)),
                lag=int(1500 - 10 * i),
            )
            for i in range(30)
        )
        for c in s.query(Cluster).filter(Cluster.name == "a-jkt"):
            c.health, c.health_at = HEALTH, T + 50
            c.controller_host, c.controller_pid, c.controller_heartbeat = "gw-1", 777, T + 55
    pin_times(registry, T)


def pin_times(registry: Registry, t: float) -> None:
    """Set every creation and audit time to ``t`` (ages and dates on screen stop depending on the run)."""
    with registry.session() as s:
        for model in (DataCentre, Team, User, Cluster, Dagger, DaggerVersion):
            s.execute(update(model).values(created_at=t))
        s.execute(update(Dagger).values(updated_at=t))
        s.execute(update(AuditEntry).values(at=t))
        s.execute(update(DaggerStatus).where(DaggerStatus.actual_state != "running").values(updated_at=t))


def keys(text: str) -> Sequence[str]:
    """Return the key names that type ``text`` with ``pilot.press``."""
    names = {
        " ": "space",
        "\n": "enter",
        "-": "minus",
        "_": "underscore",
        ",": "comma",
        "(": "left_parenthesis",
        ")": "right_parenthesis",
        "'": "apostrophe",
        ".": "full_stop",
        "/": "slash",
        "*": "asterisk",
        "=": "equals_sign",
    }
    return [names.get(ch, ch) for ch in text]


async def until(pilot: Pilot[None], check: Callable[[], Any], what: str, timeout: float = 30.0) -> None:
    """Let the app run until ``check()`` is true (a debounced validation, a redraw): a busy machine runs timers
    late. Raises AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        await pilot.pause(0.1)


class HeldPlane(ControlPlane):
    """The control plane of ``registry`` as ``user``, whose calls named in :attr:`hold` wait until
    :attr:`release` is set: a refresh in flight while the operator leaves its screen. :attr:`held` is set
    once such a call waits (in a worker thread), and :attr:`answered` once it has returned."""

    def __init__(self, registry: Registry, user: str) -> None:
        super().__init__(registry, user)
        self.hold: set[str] = set()
        self.release, self.held, self.answered = threading.Event(), threading.Event(), threading.Event()

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[HeldPlane]:
        """Release every held call when the block ends, however it ends (the app waits for its worker
        threads before it exits)."""
        try:
            yield self
        finally:
            self.release.set()

    def _waits(self, call: str, answer: Callable[[], Any]) -> Any:
        if call not in self.hold or threading.current_thread() is threading.main_thread():
            return answer()
        self.held.set()
        assert self.release.wait(120), f"{call} was never released"
        try:
            return answer()
        finally:
            self.answered.set()

    def clusters(self) -> Any:
        return self._waits("clusters", super().clusters)

    def daggers(self, cluster: str | None = None, search: str | None = None) -> Any:
        return self._waits("daggers", lambda: super(HeldPlane, self).daggers(cluster, search))

    def dagger_screen(self, ref: str, samples: int = 120, audit: int = 50) -> Any:
        return self._waits("dagger_screen", lambda: super(HeldPlane, self).dagger_screen(ref, samples, audit))

    def output_fields(self, ref: str, sink: str | None = None) -> Any:
        return self._waits("output_fields", lambda: super(HeldPlane, self).output_fields(ref, sink))

    def output(self, ref: str, query: Any, sink: str | None = None) -> Any:
        return self._waits("output", lambda: super(HeldPlane, self).output(ref, query, sink))

    def cluster_health(self, cluster: str, *, live: bool = False) -> Any:
        return self._waits(
            "cluster_health" + (" live" if live else ""),
            lambda: super(HeldPlane, self).cluster_health(cluster, live=live),
        )

    def cluster_topics(self, cluster: str) -> Any:
        return self._waits("cluster_topics", lambda: super(HeldPlane, self).cluster_topics(cluster))

    def validate(self, cluster: str, text: str) -> Any:
        return self._waits("validate", lambda: super(HeldPlane, self).validate(cluster, text))


async def check_snapshot(pilot: Pilot[None], name: str) -> Path:
    """Compare the screen as SVG with ``snapshots/<name>.svg``; write it when missing or when
    ``DAGGERS_UPDATE_SNAPSHOTS=1``. Raises AssertionError (keeping ``<name>.new.svg``) on a difference.

    The focus is taken away while the picture is taken (a blinking cursor would make it depend on the
    moment), and given back after."""
    app = pilot.app
    focused = app.focused
    app.screen.set_focus(None)
    await pilot.pause()
    path = SNAPSHOTS / f"{name}.svg"
    expected = path.read_text() if path.exists() else None
    # On a busy machine a part of the screen (the footer) can be drawn a moment later: a picture that
    # differs is taken again for up to 5 s before it counts as a difference.
    svg = app.export_screenshot()
    for _ in range(20):
        if expected is None or svg == expected:
            break
        await pilot.pause(0.25)
        svg = app.export_screenshot()
    if focused is not None:
        focused.focus()
        await pilot.pause()
    SNAPSHOTS.mkdir(exist_ok=True)
    if os.environ.get("DAGGERS_UPDATE_SNAPSHOTS") == "1" or not path.exists():
        path.write_text(svg)
        return path
    if expected != svg:
        new = path.with_suffix(".new.svg")
        new.write_text(svg)
        raise AssertionError(
            f"screen {name} differs from {path}; see {new} (DAGGERS_UPDATE_SNAPSHOTS=1 accepts it)"
        )
    return path


async def settle(app: Any) -> None:
    """Wait until no worker of ``app`` is pending or running. A worker cancelled by a newer one of its exclusive
    group (the form validates again at each pause in typing) is not an error; a worker that failed is."""
    from textual.worker import WorkerCancelled, WorkerState

    while live := [w for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]:
        for outcome in await asyncio.gather(*(w.wait() for w in live), return_exceptions=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, WorkerCancelled):
                raise outcome


async def new_dagger_preview(app: Any, pilot: Pilot[None], cluster: str, name: str, topic: str) -> Any:
    """Open the new-dagger form of ``cluster``, type ``name``, pick ``topic`` in the topic list and press F5
    (Preview); return the form (its preview runs in a worker)."""
    from textual.widgets import SelectionList

    from tui.form import DaggerFormScreen

    app.new_dagger(cluster)
    await pilot.pause()
    form = app.screen
    assert isinstance(form, DaggerFormScreen)
    await settle(app)
    await pilot.press(*keys(name))
    topics = form.query_one("#topics", SelectionList)
    topics.focus()
    await pilot.pause()
    if topics.highlighted is None:
        await pilot.press("down")
    while topics.get_option_at_index(topics.highlighted).value != topic:
        await pilot.press("down")
    await pilot.press("space", "f5")
    return form
