"""A fused group whose query fails on one member's SQL (issue 17: "when one dagger fails, only it stops"),
in ONE shared host process on a real broker (tansu), a real InfluxDB and real Spark.

* Three fused daggers run as one query. One of them divides by zero at run time (ANSI SQL) on the
  events of the second step: the group's query fails, the group splits, and each member goes on in a
  query of its own from where the group would have started again. The one that divides by zero fails
  alone, with its error.
* Once it has failed, the other two come back together in the group's next generation, each from its own
  query's progress: every window exactly once, every event counted once.
* Its edit (the division gone) joins the group again, with every window from where it failed.
* A host started again resumes the group exactly.
* Through all of it, InfluxDB got each window of the two that never failed once (a subscription counts
  every point written): none was written twice.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from job.shared.group import GROUP_FILE, SPLIT_FILE, solo_key
from tests.helpers import BOOKINGS_SQL, wait_until
from tests.job.control.test_control_e2e import T0, closed
from tests.job.shared.host_world import HostWorld, status, windows
from tests.job.shared.test_host_fusion import FUSED, assign_fused

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The bookings query, but its WHERE divides by zero for the events from the second step on (minute 20).
STEP_1 = (T0 + timedelta(minutes=20)).strftime("%Y-%m-%d %H:%M:%S")
DIVIDES_SQL = BOOKINGS_SQL.replace(
    "WHERE status = 'COMPLETED'",
    f"WHERE status = 'COMPLETED' AND fare_idr / CASE WHEN rowtime < TIMESTAMP '{STEP_1}' THEN 1 ELSE 0 END > 0",
)


def test_a_member_that_fails_at_run_time_fails_alone_and_the_others_come_back_together(  # type: ignore[no-untyped-def]
    host_world: HostWorld, influxdb, tmp_path: Path
) -> None:
    assert DIVIDES_SQL != BOOKINGS_SQL
    w, host = host_world.world, host_world.host
    f = host.folder
    w.step(0)
    assign_fused(f, w, tmp_path, ("fa", "fb"))
    assign_fused(f, w, tmp_path, ("fx",), sql=DIVIDES_SQL)
    host_world.watch("fa", "fb")  # every point written to their databases, by window end
    host.start()
    host.ready()
    for key in ("fa", "fb", "fx"):  # the division is by one for these events
        w.exact(key, host)
    gkey = host.dagger("fa")["group"]
    groups = f.root / "groups"
    first = json.loads((groups / gkey / GROUP_FILE).read_text())
    assert first["members"] == {"fa": "fa-1", "fb": "fb-1", "fx": "fx-1"}, first

    # events past minute 20: fx divides by zero, the group's query fails and splits; fx fails alone
    w.step(1)
    failed = host.wait_state("fx", "failed")
    assert "DIVIDE_BY_ZERO" in failed["error"], failed["error"]
    assert failed["group"] == solo_key(gkey, "fx"), failed
    assert status(w.checkpoint("fx"))["state"] == "failed"
    # ... and fa and fb come back together in the group's next generation, each from its own query
    for key in ("fa", "fb"):
        wait_until(
            f"{key} back in {gkey}",
            lambda k=key: (d := host.dagger(k)).get("group") == gkey and d.get("state") == "running",
            240,
            log=f.log_path,
        )
        w.exact(key, host)
    back = json.loads((groups / gkey / GROUP_FILE).read_text())
    assert back["members"] == {"fa": "fa-1", "fb": "fb-1"} and back["generation"] > first["generation"], back
    log = f.log_path.read_text()
    assert f"group {gkey}: fx no longer there as they split; the other 2 come back together" in log
    for key in ("fa", "fb"):
        assert f"group {solo_key(gkey, key)} gen 1: running 1 dagger" in log
    assert not (groups / gkey / SPLIT_FILE).exists()
    assert not (groups / solo_key(gkey, "fa")).exists() and not (groups / solo_key(gkey, "fb")).exists()
    # fx has the windows of the first step, written before it failed, and nothing of the failed batch
    assert windows(influxdb, w.dbs["fx"]) == closed(w.rows[:-1501])

    # fx edited (no division): it joins the group again, with every window from where it failed
    f.assign("fx", w.spec("fx", 2, extra=FUSED), tmp_path, "fx-2")
    host.wait_state("fx", "running", token="fx-2")
    w.step(2)
    for key in ("fa", "fb", "fx"):
        w.exact(key, host)
        assert host.dagger(key)["group"] == gkey
    assert json.loads((groups / gkey / GROUP_FILE).read_text())["members"] == {
        "fa": "fa-1",
        "fb": "fb-1",
        "fx": "fx-2",
    }

    # a host started again resumes the group exactly
    assert host.stop() == 0
    host.start()
    host.ready()
    w.step(3)
    for key in ("fa", "fb", "fx"):
        w.exact(key, host)
        assert host.dagger(key)["group"] == gkey

    # no window of fa or fb was written twice: not at the split, their return, fx's or the restart
    want = Counter(("bookings", end) for end, *_ in closed(w.rows))
    for key in host_world.watches:
        host_world.written_once(key, want)
