"""On a real broker (tansu), a real InfluxDB and real Spark: a fused dagger (``isolation: fused``, its group's
query) whose InfluxDB hangs (it takes the connection and never answers) retries to open its sink before its
group takes the host's start gate, so a healthy dagger assigned right after it starts and writes its windows
meanwhile; a stop of the fused one ends its group's wait (no query started) at once, and so does a stop
followed by the kill its controller sends once its stop timed out. Both cases run in one host process, each on
daggers of its own."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from job.control.health_model import DaggerFacts, HealthSettings, dagger_health
from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, ModuleHost, status
from tests.job.shared.test_host_fusion import FUSED
from tests.job.shared.test_host_slow_start import RETRIES, _start_retry

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def hung_url() -> Iterator[str]:
    """The URL of a listener that takes every connection (the kernel completes it) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as sock:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_a_fused_sink_that_hangs_holds_up_no_other_dagger(
    module_host_world: HostWorld, hung_url: str, end: str
) -> None:
    w, host = module_host_world.world, module_host_world.host
    assert isinstance(host, ModuleHost)
    host.start()
    host.ready()
    f = host.folder
    fz, good = f"fz-{end}", f"good-{end}"  # the module's host runs both cases
    w.step(0)
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
