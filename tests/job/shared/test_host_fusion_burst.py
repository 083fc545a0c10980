"""A fused group under a burst on one partition, capped by its read limit, drops no on-time record, and
counts the records it drops as late as records (issue 51: 1,392 records short of one window, "1 dropped").

Real tansu, Spark and InfluxDB, one shared host: the group's windows equal the counts of the records produced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from job.stack.broker import create_topic
from tests.helpers import expected_bookings, unique, wait_until
from tests.job.shared.host_world import HostWorld, status, windows
from tests.job.sources.test_burst_alignment import CAP, CLOSES_AT_S, PARTITIONS, produce_skewed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FUSED = "isolation: fused\n"  # not light: a 1-s trigger


def test_a_fused_group_under_a_burst_drops_no_on_time_record(
    host_world: HostWorld, tansu_broker: str, tmp_path: Path
) -> None:
    w, host = host_world.world, host_world.host
    topic = unique("fused-burst")
    create_topic(tansu_broker, topic, PARTITIONS)
    rows = produce_skewed(tansu_broker, topic)
    want = {k: v for k, v in expected_bookings(rows).items() if k[0] <= CLOSES_AT_S}
    for key in ("fa", "fb"):  # assigned before the host starts: one generation
        spec = w.spec(key, topic=topic, extra=FUSED)
        spec.write_text(
            spec.read_text().replace("max_records_per_batch: 2500", f"max_records_per_batch: {CAP}")
        )
        host.folder.assign(key, spec, tmp_path, f"{key}-1")
    host.start()
    host.ready()
    for key in ("fa", "fb"):
        wait_until(
            f"{key}: every event read",
            lambda key=key: status(w.checkpoint(key)).get("input_rows") == len(rows),
            300,
            log=host.folder.log_path,
        )
        wait_until(
            f"{key}: the last window written",
            lambda key=key: (
                max((k[0] for k in windows(w.influxdb, w.dbs[key])), default=0) == max(k[0] for k in want)
            ),
            120,
            log=host.folder.log_path,
        )
    got = {key: windows(w.influxdb, w.dbs[key]) for key in ("fa", "fb")}
    dropped = {key: status(w.checkpoint(key)).get("late_rows_dropped") for key in ("fa", "fb")}
    short = {key: sum(want.values()) - sum(got[key].values()) for key in ("fa", "fb")}
    assert short == {"fa": 0, "fb": 0}, (short, dropped)
    assert got == {"fa": want, "fb": want}
    assert dropped == {"fa": 0, "fb": 0}
