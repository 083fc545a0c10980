"""On a real broker (tansu), a real InfluxDB and real Spark: a dagger of a shared host whose sink cannot start
(its InfluxDB refuses the connection) retries to open it on its own, so a healthy dagger assigned right after it
starts and writes its windows meanwhile; a stop of the one still starting ends its retries at once, and so does
a kill asked through the host's folder (what the controller sends once its stop timed out).

The same for a fused dagger (``isolation: fused``, its group's query) whose InfluxDB hangs (it takes the
connection and never answers): it retries to open its sink before its group takes the host's start gate, a
sibling in its group is held up and told by whom, and a stop (or a stop and a kill) ends the group's wait.

Every case runs in one host process, each on daggers of its own."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from job.control.health_model import DaggerFacts, HealthSettings, dagger_health
from job.shared.channel import HostFolder
from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, ModuleHost, World, status
from tests.job.shared.test_host_fusion import FUSED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Many tries, long waits: giving up would take minutes.
RETRIES = "  max_retries: 15\n  max_backoff_s: 30\n  timeout_s: 2\n"


@pytest.fixture
def refused_url() -> Iterator[str]:
    """The URL of a port bound by nobody's listener: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _started(hw: HostWorld) -> tuple[World, ModuleHost, HostFolder]:
    """The module's host, started once and ready, and the test's first step of events."""
    w, host = hw.world, hw.host
    assert isinstance(host, ModuleHost)
    host.start()
    host.ready()
    w.step(0)
    return w, host, host.folder


def _start_retry(checkpoint: Path) -> dict[str, Any]:
    """Return the start retry its sink reports in ``status.json`` ({} when none)."""
    return dict(((status(checkpoint).get("sinks") or {}).get("influx") or {}).get("retrying") or {})


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_a_sink_that_cannot_start_holds_up_no_other_dagger(
    module_host_world: HostWorld, refused_url: str, end: str
) -> None:
    w, host, f = _started(module_host_world)
    bad, good = f"bad-{end}", f"good-{end}"  # the module's host runs every case
    f.assign(bad, w.spec(bad, influx_url=refused_url, sink_extra=RETRIES), w.tmp, "b1")
    bad_checkpoint = w.checkpoint(bad)
    wait_until("bad's sink retrying to start", lambda: _start_retry(bad_checkpoint), 240, log=f.log_path)
    f.assign(good, w.spec(good), w.tmp, "g1")

    # the healthy dagger runs and writes every window while the other one still retries to start
    w.exact(good, host)
    assert host.dagger(good)["state"] == "running"
    assert host.dagger(bad)["state"] == "starting"
    retry = _start_retry(bad_checkpoint)
    assert retry["of"] == 15 and retry["attempt"] < 15, retry
    assert f"{bad}: query" not in host.log()  # its query never started

    # a stop of the dagger still starting ends its wait (up to 30 s) at once: stopped, not given up
    # (retrying on, it would fail minutes later, giving up)
    f.unassign(bad)
    if end == "kill":
        f.kill(bad, "b1")
    ended = host.wait_state(bad, "stopped", timeout=60)
    assert ended["token"] == "b1" and ended.get("error") is None, ended
    assert f"{bad}: stopped before its query started" in host.log()
    assert "giving up" not in host.log()
    if end == "kill":
        wait_until("the kill forgotten", lambda: not f.kills(), 30, log=f.log_path)
    assert host.dagger(good)["state"] == "running"


@pytest.fixture
def hung_url() -> Iterator[str]:
    """The URL of a listener that takes every connection (the kernel completes it) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as sock:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_a_fused_sink_that_hangs_holds_up_no_other_dagger(
    module_host_world: HostWorld, hung_url: str, end: str
) -> None:
    w, host, f = _started(module_host_world)
    fz, good = f"fz-{end}", f"fgood-{end}"  # the module's host runs every case
    fy = f"fy-{end}"  # a sibling in fz's group, whose own sink works: held up, and told by whom
    if end == "stop":
        f.assign(fy, w.spec(fy, extra=FUSED), w.tmp, "y1")
    f.assign(fz, w.spec(fz, extra=FUSED, influx_url=hung_url, sink_extra=RETRIES), w.tmp, "z1")
    fz_checkpoint = w.checkpoint(fz)
    wait_until("fz's sink retrying to start", lambda: _start_retry(fz_checkpoint), 240, log=f.log_path)
    f.assign(good, w.spec(good), w.tmp, "g1")
    if end == "stop":
        held = wait_until("fy held up", lambda: status(w.checkpoint(fy)).get("held_up"), 120, log=f.log_path)
        assert held["by"] == f"waiting for {fz}'s sink to start in their fused group", held
        now = time.time()
        row = {
            "actual_state": "running",
            "started_at": held["since"] - 5.0,
            "progress": status(w.checkpoint(fy)),
        }
        h = dagger_health(DaggerFacts.of("running", row, heartbeat=now), now, HealthSettings())
        assert h.reason == f"held up for {now - held['since']:.0f} s: {held['by']}", h

    # the healthy dagger runs and writes every window while the fused group still retries to start
    w.exact(good, host)
    assert host.dagger(good)["state"] == "running"
    assert host.dagger(fz)["state"] == "starting"
    retry = _start_retry(fz_checkpoint)
    assert retry["of"] == 15 and retry["attempt"] < 15, retry
    assert "InfluxDB at " + hung_url + " is unreachable: ReadTimeout" in retry["error"], retry
    started = [json.loads(g.read_text())["members"] for g in (f.root / "groups").glob("*/group.json")]
    assert not [m for m in started if fz in m], started  # its group's query never started

    # a stop of the fused dagger ends its group's wait (up to 30 s, plus a try of 5 s): stopped, not failed
    f.unassign(fz)
    if end == "kill":
        f.kill(fz, "z1")
    ended = host.wait_state(fz, "stopped", timeout=60)
    assert ended["token"] == "z1" and ended.get("error") is None, ended
    text = host.log()
    assert "gen 1: stopped before its query started" in text
    assert "giving up" not in text and f"{fz} (group" not in text  # never failed
    if end == "kill":
        wait_until("the kill forgotten", lambda: not f.kills(), 30, log=f.log_path)
    assert host.dagger(good)["state"] == "running"
    if end == "stop":  # its group goes on without fz: fy reads, no longer held up
        w.exact(fy, host)
        assert status(w.checkpoint(fy)).get("held_up") is None
