"""A fused group whose query fails on one member's SQL (issue 17: "when one dagger fails, only it stops"),
in ONE shared host process on a real broker (tansu), a real InfluxDB and real Spark.

* Three fused daggers run as one query. One of them divides by zero at run time (ANSI SQL) on the
  events of the second step: the group's query fails, the group splits, and each member goes on in a
  query of its own from where the group would have started again. The one that divides by zero fails
  alone, with its error; the other two have every window exactly once and every event counted once.
* Its edit (the division gone) runs it again on its own, with every window from where it failed.
* A host started again keeps the split: each member resumes its own query, exactly.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from job.shared.channel import HostFolder
from job.shared.group import GROUP_FILE, SPLIT_FILE, solo_key
from tests.helpers import BOOKINGS_SQL
from tests.job.control.test_control_e2e import T0, closed
from tests.job.shared.host_world import HostProc, status, windows
from tests.job.shared.test_host_fusion import FUSED, assign_fused, group_file
from tests.job.shared.test_host_isolation import World

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The bookings query, but its WHERE divides by zero for the events from the second step on (minute 20).
STEP_1 = (T0 + timedelta(minutes=20)).strftime("%Y-%m-%d %H:%M:%S")
DIVIDES_SQL = BOOKINGS_SQL.replace(
    "WHERE status = 'COMPLETED'",
    f"WHERE status = 'COMPLETED' AND fare_idr / CASE WHEN rowtime < TIMESTAMP '{STEP_1}' THEN 1 ELSE 0 END > 0")


def test_a_member_that_fails_at_run_time_fails_alone_and_the_group_goes_on_apart(  # type: ignore[no-untyped-def]
        tansu_broker: str, influxdb, tmp_path: Path) -> None:
    assert DIVIDES_SQL != BOOKINGS_SQL
    w = World(tansu_broker, influxdb, tmp_path)
    host = HostProc(HostFolder(tmp_path / "host"))
    f = host.folder
    try:
        w.step(0)
        assign_fused(f, w, tmp_path, ("fa", "fb"))
        assign_fused(f, w, tmp_path, ("fx",), sql=DIVIDES_SQL)
        host.start()
        host.ready()
        for key in ("fa", "fb", "fx"):  # the division is by one for these events
            w.exact(key, host)
        group = group_file(f)
        assert group["members"] == {"fa": "fa-1", "fb": "fb-1", "fx": "fx-1"}, group
        gkey = host.dagger("fa")["group"]

        # events past minute 20: fx divides by zero, the group's query fails and splits
        w.step(1)
        failed = host.wait_state("fx", "failed")
        assert "DIVIDE_BY_ZERO" in failed["error"], failed["error"]
        assert failed["group"] == solo_key(gkey, "fx"), failed
        assert status(w.checkpoint("fx"))["state"] == "failed"
        for key in ("fa", "fb"):
            w.exact(key, host)
            state = host.dagger(key)
            assert state["state"] == "running" and state["group"] == solo_key(gkey, key), state
            solo = json.loads((f.root / "groups" / solo_key(gkey, key) / GROUP_FILE).read_text())
            assert solo["members"] == {key: f"{key}-1"} and solo["generation"] == 1, solo
        split = json.loads((f.root / "groups" / gkey / SPLIT_FILE).read_text())
        assert split["members"] == {"fa": "fa-1", "fb": "fb-1", "fx": "fx-1"}, split
        assert "DIVIDE_BY_ZERO" in split["error"]
        # fx has the windows of the first step, written before it failed, and nothing of the failed batch
        assert windows(influxdb, w.dbs["fx"]) == closed(w.rows[:-1501])

        # fx edited (no division): it runs again in its group of one, from where the group failed
        f.assign("fx", w.spec("fx", 2, extra=FUSED), tmp_path, "fx-2")
        host.wait_state("fx", "running", token="fx-2")
        w.step(2)
        for key in ("fa", "fb", "fx"):
            w.exact(key, host)
        assert host.dagger("fx")["group"] == solo_key(gkey, "fx")

        # a host started again keeps the split, and each member resumes its own query exactly
        assert host.stop() == 0
        host.start()
        host.ready()
        w.step(3)
        for key in ("fa", "fb", "fx"):
            w.exact(key, host)
            assert host.dagger(key)["group"] == solo_key(gkey, key)
    finally:
        host.stop()
