"""On a real broker (tansu), a real InfluxDB and real Spark, in a shared host: a dagger (one of its own, and a
fused one, whose group's query writes it) reports the micro-batch it runs in its status.json
(``running_batch``: id, since) from the batch's start until it is reported, so the health model tells a batch
in flight from a dagger that reads nothing. The batch is held in its sink's write (InfluxDB behind a relay
that holds every byte, its timeout long), then released: the report is cleared and every window is exact.

Both cases run in one host process (one JVM start), each on a dagger of its own."""

from __future__ import annotations

import time

import pytest

from job.control.health_model import RUNNING, STALLED, DaggerFacts, HealthSettings, dagger_health
from tests.helpers import wait_until
from tests.job.shared.host_world import HostWorld, status
from tests.job.shared.relay import Relay
from tests.job.shared.test_host_fusion import FUSED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Quick thresholds: a report older than 2 s is stale; a batch is named from 1 s in.
QUICK = HealthSettings(stall_after_s=2.0, brokers_silent_after_s=1.0)


@pytest.mark.parametrize("extra", ["", FUSED], ids=["own-query", "fused"])
def test_a_batch_in_flight_is_reported_until_it_ends(  # type: ignore[no-untyped-def]
    module_host_world: HostWorld, influxdb, extra: str
) -> None:
    w, host = module_host_world.world, module_host_world.host
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    f = host.folder
    key = "held-fused" if extra else "held"  # the module's host runs both cases
    try:
        w.step(0)
        held = w.spec(
            key, extra=extra, influx_url=f"http://127.0.0.1:{relay.port}", sink_extra="  timeout_s: 120\n"
        )
        f.assign(key, held, w.tmp, "h1")
        host.start()
        host.ready()
        w.exact(key, host)
        cp = w.checkpoint(key)
        # the batch that wrote the windows is reported a little later (listener events come after the batch)
        wait_until(
            "no batch in flight",
            lambda: "running_batch" in (st := status(cp)) and not st["running_batch"],
            60,
        )

        relay.hold()  # InfluxDB seems to hang: the next batch with rows waits in its write
        w.step(1)
        flight = wait_until(
            "a batch in flight for 3 s",
            lambda: (rb := status(cp).get("running_batch")) and time.time() - rb["since"] >= 3 and rb,
            240,
            log=f.log_path,
        )
        progress = status(cp)
        assert progress["running_batch"] == flight and flight["id"] > progress["last_batch_id"], progress
        assert progress["updated_at"] == flight["since"]  # the report at its start, nothing since

        now = time.time()
        row = {"actual_state": "running", "started_at": flight["since"] - 60.0, "progress": progress}
        h = dagger_health(DaggerFacts.of("running", row, heartbeat=now), now, QUICK)
        assert (h.state, h.reason) == (
            RUNNING,
            f"batch {flight['id']} running for {now - flight['since']:.0f} s",
        )
        # without it, the same report reads as a dagger that reports nothing
        quiet = {**row, "progress": {k: v for k, v in progress.items() if k != "running_batch"}}
        h = dagger_health(DaggerFacts.of("running", quiet, heartbeat=now), now, QUICK)
        assert (h.state, h.reason) == (STALLED, f"no report for {now - flight['since']:.0f} s")

        relay.release()
        w.exact(key, host)
        # the held batch's record is cleared; the next micro-batch may already be in flight (its own record)
        wait_until(
            "the held batch reported",
            lambda: (
                (d := status(cp))["last_batch_id"] >= flight["id"]
                and ((rb := d.get("running_batch")) is None or rb["id"] > flight["id"])
                and d
            ),
            60,
        )
        assert host.dagger(key)["state"] == "running"
    finally:
        relay.release()
        relay.cut()
