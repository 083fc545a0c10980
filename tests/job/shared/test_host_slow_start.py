"""On a real broker (tansu), a real InfluxDB and real Spark: a dagger of a shared host whose sink cannot start
(its InfluxDB refuses the connection) retries to open it on its own, so a healthy dagger assigned right after it
starts and writes its windows meanwhile; a stop of the one still starting ends its retries at once, and so does
a kill asked through the host's folder (what the controller sends once its stop timed out). Both cases run in
one host process, each on daggers of its own."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, ModuleHost, status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Many tries, long waits: giving up would take minutes.
RETRIES = "  max_retries: 15\n  max_backoff_s: 30\n  timeout_s: 2\n"


@pytest.fixture
def refused_url() -> Iterator[str]:
    """The URL of a port bound by nobody's listener: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _start_retry(checkpoint: Path) -> dict[str, Any]:
    """Return the start retry its sink reports in ``status.json`` ({} when none)."""
    return dict(((status(checkpoint).get("sinks") or {}).get("influx") or {}).get("retrying") or {})


@pytest.mark.parametrize("end", ["stop", "kill"])
def test_a_sink_that_cannot_start_holds_up_no_other_dagger(
    module_host_world: HostWorld, refused_url: str, end: str
) -> None:
    w, host = module_host_world.world, module_host_world.host
    assert isinstance(host, ModuleHost)
    host.start()
    host.ready()
    f = host.folder
    bad, good = f"bad-{end}", f"good-{end}"  # the module's host runs both cases
    w.step(0)
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
