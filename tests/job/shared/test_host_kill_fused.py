"""On a real broker (tansu), a real InfluxDB and real Spark: a fused dagger (``isolation: fused``, one query
for its group) whose sink retries a write does not stop when it is unassigned: its group's generation waits
for the batch in progress. The kill its controller sends once its ``stop_timeout_s`` has passed (through the
host's folder) ended a dagger of its own, but a fused one's was forgotten at once: nothing of that key was
stopping alone. Now the kill ends the generation: the leaving dagger reports ``stopping``, then
``stopped``; the dagger that stays is not failed, and its next generation writes every window exactly
once."""

from __future__ import annotations

import time

import pytest

from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, status, windows
from tests.job.shared.relay import Relay
from tests.job.shared.test_host_fusion import FUSED, group_file

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_kill_ends_a_fused_run_whose_sink_retries(host_world: HostWorld, influxdb) -> None:  # type: ignore[no-untyped-def]
    w, host = host_world.world, host_world.host
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    f = host.folder
    try:
        w.step(0)
        f.assign("fa", w.spec("fa", extra=FUSED), w.tmp, "fa-1")
        stuck = w.spec(
            "fk",
            extra=FUSED,
            influx_url=f"http://127.0.0.1:{relay.port}",
            sink_extra="  max_retries: 100\n  max_backoff_s: 2\n  timeout_s: 2\n",
        )
        f.assign("fk", stuck, w.tmp, "fk-1")
        host.start()
        host.ready()
        for key in ("fa", "fk"):
            wait_until(
                f"{key}: a first window", lambda k=key: windows(influxdb, w.dbs[k]), 240, log=f.log_path
            )
        assert group_file(f)["members"] == {"fa": "fa-1", "fk": "fk-1"}
        relay.cut()  # InfluxDB is gone for fk: its next write retries (100 times, 2 s apart)
        w.step(1)
        wait_until(
            "fk's sink retrying",
            lambda: ((status(w.checkpoint("fk")).get("sinks") or {}).get("influx") or {}).get("retrying"),
            240,
            log=f.log_path,
        )
        f.unassign("fk")
        host.wait_state("fk", "stopping", timeout=60)
        f.kill("fk", "fk-1")
        asked = time.monotonic()
        ended = host.wait_state("fk", "stopped", timeout=60)
        assert ended["token"] == "fk-1" and time.monotonic() - asked < 60
        log = f.log_path.read_text()
        assert "fk: killed: its controller stopped it: it did not stop in time" in log
        wait_until("the kill forgotten", lambda: not f.kills(), 30, log=f.log_path)
        # fa stays: its group goes on without fk, and it has every window exactly once
        wait_until("fa's group without fk", lambda: group_file(f)["members"] == {"fa": "fa-1"}, 120)
        w.exact("fa", host)
        host.wait_state("fa", "running", timeout=120)  # its group's next generation may still be starting
        assert "fa (group" not in f.log_path.read_text()  # never failed
    finally:
        relay.cut()
