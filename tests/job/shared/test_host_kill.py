"""On a real broker (tansu), a real InfluxDB and real Spark: a dagger of a shared host whose sink retries a
write does not stop when it is unassigned (a new version deployed during an InfluxDB outage waited minutes for
the old run's retries). A kill asked through the host's folder (what the controller sends once its
``stop_timeout_s`` has passed) makes that run's sink give up at its next wait, and the run ends."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, status, windows
from tests.job.shared.relay import Relay

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_kill_ends_a_run_whose_sink_retries(host_world: HostWorld, influxdb) -> None:  # type: ignore[no-untyped-def]
    w, host = host_world.world, host_world.host
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    try:
        host.start()
        host.ready()
        f = host.folder
        w.step(0)
        spec = w.spec(
            "stuck",
            influx_url=f"http://127.0.0.1:{relay.port}",
            sink_extra="  max_retries: 100\n  max_backoff_s: 2\n  timeout_s: 2\n",
        )
        f.assign("stuck", spec, w.tmp, "k1")
        wait_until("a first window", lambda: windows(influxdb, w.dbs["stuck"]), 240, log=f.log_path)
        relay.cut()  # InfluxDB is gone for this dagger: its next write retries (100 times, 2 s apart)
        w.step(1)
        checkpoint = w.checkpoint("stuck")
        wait_until(
            "its sink retrying",
            lambda: ((status(checkpoint).get("sinks") or {}).get("influx") or {}).get("retrying"),
            240,
            log=f.log_path,
        )
        f.unassign("stuck")
        host.wait_state("stuck", "stopping", timeout=60)
        f.kill("stuck", "k1")
        asked = time.monotonic()
        ended = host.wait_state("stuck", "stopped", timeout=60)
        assert ended["token"] == "k1" and time.monotonic() - asked < 60
        assert "stuck: killed: its controller stopped it: it did not stop in time" in f.log_path.read_text()
        wait_until("the kill forgotten", lambda: not f.kills(), 30, log=f.log_path)
    finally:
        relay.cut()
