"""On a real broker (tansu), a real InfluxDB and real Spark: a fused dagger (``isolation: fused``, its group's
query) whose InfluxDB hangs (it takes the connection and never answers) retries to open its sink before its
group takes the host's start gate, so a healthy dagger assigned right after it starts and writes its windows
meanwhile; a stop of the fused one ends its group's wait (no query started) at once, and so does a stop
followed by the kill its controller sends once its stop timed out. Both cases run in one host process, each on
daggers of its own."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, ModuleHost
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
    f.assign(fz, w.spec(fz, extra=FUSED, influx_url=hung_url, sink_extra=RETRIES), w.tmp, "z1")
    fz_checkpoint = w.checkpoint(fz)
    wait_until("fz's sink retrying to start", lambda: _start_retry(fz_checkpoint), 240, log=f.log_path)
    f.assign(good, w.spec(good), w.tmp, "g1")

    # the healthy dagger runs and writes every window while the fused group still retries to start
    w.exact(good, host)
    assert host.dagger(good)["state"] == "running"
    assert host.dagger(fz)["state"] == "starting"
    retry = _start_retry(fz_checkpoint)
    assert retry["of"] == 15 and retry["attempt"] < 15, retry
    assert "InfluxDB at " + hung_url + " is unreachable: ReadTimeout" in retry["error"], retry
    assert not list((f.root / "groups").glob("*/group.json"))  # its group's query never started

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
