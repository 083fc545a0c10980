"""A fused group of pass-throughs whose query fails on one member's SQL, in ONE shared host process on a
real broker (tansu), a real InfluxDB and real Spark (issue 17: "when one dagger fails, only it stops").

* Three fused pass-throughs run as one query. One of them divides by zero at run time on the events of
  the second step: the group splits, each member goes on in a query of its own, and the one that divides
  by zero fails alone.
* Once it has failed, the other two come back together: the group's next generation reads from the
  furthest offsets their queries had reached, and one that had stopped short first catches up
  (:mod:`job.shared.catchup`). Every event reaches each of them once: InfluxDB has every row, a
  subscription saw each row written once, and ``status.json`` counts every event once.
* A member that comes back short of the others (its group of one had not read the last step when it
  stopped: the test puts its checkpoint, its rows and its count back to before that step) gets exactly
  the records in between, once, and the one ahead gets none of them again.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from job.shared.group import GROUP_FILE, SPLIT_FILE, solo_key
from job.stack.influx import influx_query
from tests.helpers import wait_until
from tests.job.control.test_control_e2e import T0
from tests.job.shared.host_world import HostWorld, status
from tests.job.shared.test_host_fusion import FUSED_EVERY_S, PASS_SQL, passed, rows_of
from tests.job.shared.test_host_fusion_split import STEP_1

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: The pass-through, but its WHERE divides by zero for the events from the second step on (minute 20).
DIVIDES_PASS_SQL = PASS_SQL + (
    f"\nWHERE fare_idr / CASE WHEN rowtime < TIMESTAMP '{STEP_1}' THEN 1 ELSE 0 END >= 0"
)


def per_second(rows: list[dict]) -> Counter[tuple[str, int]]:
    """("bookings", second) -> the rows of that second: the points a pass-through writes once each."""
    return Counter(("bookings", int(r["event_timestamp"].timestamp())) for r in rows)


def test_pass_throughs_come_back_together_after_one_fails_and_each_event_arrives_once(  # type: ignore[no-untyped-def]
    host_world: HostWorld, influxdb, tmp_path: Path
) -> None:
    w, host = host_world.world, host_world.host
    f = host.folder
    w.step(0)
    for key in ("pa", "pb"):
        f.assign(key, w.spec(key, extra=FUSED_EVERY_S, sql=PASS_SQL), tmp_path, f"{key}-1")
    f.assign("px", w.spec("px", extra=FUSED_EVERY_S, sql=DIVIDES_PASS_SQL), tmp_path, "px-1")
    host_world.watch("pa", "pb")  # every point written to their databases, by second
    host.start()
    host.ready()
    for key in ("pa", "pb", "px"):  # the division is by one for these events
        wait_until(
            f"{key}: every event",
            lambda k=key: rows_of(influxdb, w.dbs[k]) == passed(w.rows),
            120,
            log=f.log_path,
        )
    gkey = host.dagger("pa")["group"]
    groups = f.root / "groups"
    first = json.loads((groups / gkey / GROUP_FILE).read_text())
    assert first["members"] == {"pa": "pa-1", "pb": "pb-1", "px": "px-1"}, first
    step_0 = len(w.rows)

    # events past minute 20: px divides by zero, the group's query fails and splits; px fails alone
    w.step(1)
    failed = host.wait_state("px", "failed")
    assert "DIVIDE_BY_ZERO" in failed["error"], failed["error"]
    assert failed["group"] == solo_key(gkey, "px"), failed
    # ... and pa and pb come back together in the group's next generation
    for key in ("pa", "pb"):
        wait_until(
            f"{key} back in {gkey}",
            lambda k=key: (d := host.dagger(k)).get("group") == gkey and d.get("state") == "running",
            240,
            log=f.log_path,
        )
    back = json.loads((groups / gkey / GROUP_FILE).read_text())
    assert back["members"] == {"pa": "pa-1", "pb": "pb-1"} and back["generation"] > first["generation"], back
    log = f.log_path.read_text()
    assert f"group {gkey}: px no longer there as they split; the other 2 come back together" in log
    assert not (groups / gkey / SPLIT_FILE).exists()
    assert not (groups / solo_key(gkey, "pa")).exists() and not (groups / solo_key(gkey, "pb")).exists()
    # px has the events of the first step, written before it failed, and nothing of the failed batch
    assert rows_of(influxdb, w.dbs["px"]) == passed(w.rows[:step_0])

    # the group reads on: every event of every step reaches pa and pb once
    w.step(2)
    for key in ("pa", "pb"):
        wait_until(
            f"{key}: every event",
            lambda k=key: rows_of(influxdb, w.dbs[k]) == passed(w.rows),
            120,
            log=f.log_path,
        )
        wait_until(
            f"{key}: every event counted once",
            lambda k=key: status(w.checkpoint(k)).get("input_rows") == len(w.rows),
            60,
            log=f.log_path,
        )
    want = per_second(w.rows)
    for key in host_world.watches:
        host_world.written_once(key, want)
    assert host.dagger("pa")["group"] == gkey and host.dagger("pb")["group"] == gkey


def test_a_pass_through_that_comes_back_behind_catches_up_exactly_once(  # type: ignore[no-untyped-def]
    host_world: HostWorld, influxdb, tmp_path: Path
) -> None:
    w, host = host_world.world, host_world.host
    f = host.folder
    w.step(0)
    for key in ("pa", "pb", "px"):
        f.assign(key, w.spec(key, extra=FUSED_EVERY_S, sql=PASS_SQL), tmp_path, f"{key}-1")
    host.start()
    host.ready()
    for key in ("pa", "pb", "px"):
        wait_until(
            f"{key}: every event",
            lambda k=key: rows_of(influxdb, w.dbs[k]) == passed(w.rows),
            120,
            log=f.log_path,
        )
    gkey = host.dagger("pa")["group"]
    groups = f.root / "groups"
    assert host.stop() == 0
    # as if the group's query had failed on a member's SQL: each member goes on in a group of its own
    (groups / gkey / SPLIT_FILE).write_text(
        json.dumps(
            {
                "members": {"pa": "pa-1", "pb": "pb-1", "px": "px-1"},
                "generation": 1,
                "error": "test",
                "at": time.time(),
            }
        )
    )
    host.start()
    host.ready()
    step_0 = len(w.rows)
    w.step(1)
    for key in ("pa", "pb", "px"):
        wait_until(
            f"{key}: every event, alone",
            lambda k=key: (
                rows_of(influxdb, w.dbs[k]) == passed(w.rows)
                and host.dagger(k).get("group") == solo_key(gkey, k)
            ),
            120,
            log=f.log_path,
        )
        wait_until(
            f"{key}: every event counted",
            lambda k=key: status(w.checkpoint(k)).get("input_rows") == len(w.rows),
            60,
            log=f.log_path,
        )
    assert host.stop() == 0

    # pb's group of one stopped before it read step 1: no batch in its checkpoint, none of step 1's rows
    # in its database, nor in its count
    solo = groups / solo_key(gkey, "pb") / "gen-1" / "spark"
    for log in ("offsets", "commits"):
        shutil.rmtree(solo / log)
        (solo / log).mkdir()
    step_1_at = (T0 + timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    influx_query(
        influxdb.url, f"DELETE FROM \"bookings\" WHERE time >= '{step_1_at}'", w.dbs["pb"], method="POST"
    )
    assert rows_of(influxdb, w.dbs["pb"]) == passed(w.rows[:step_0])
    state = json.loads((w.checkpoint("pb") / "status.json").read_text())
    (w.checkpoint("pb") / "status.json").write_text(json.dumps({**state, "input_rows": step_0}))

    # px removed: the split is over, pa and pb come back together; the group reads from pa's offsets and
    # pb first gets step 1 (1,501 records: 1,500 and the closer) in a catch-up
    f.unassign("px")
    host_world.watch("pa", "pb")  # every point written to their databases from now on, by second
    host.start()
    host.ready()
    for key in ("pa", "pb"):
        wait_until(
            f"{key} back in {gkey}",
            lambda k=key: (d := host.dagger(k)).get("group") == gkey and d.get("state") == "running",
            240,
            log=f.log_path,
        )
    log = f.log_path.read_text()
    assert "px no longer there as they split; the other 2 come back together" in log
    assert f"group {gkey} gen 2: pb caught up {len(w.rows) - step_0} records" in log, log[-3000:]
    assert "pa caught up" not in log
    step_1 = w.rows[step_0:]
    w.step(2)
    step_2 = w.rows[step_0 + len(step_1) :]
    for key in ("pa", "pb"):
        wait_until(
            f"{key}: every event",
            lambda k=key: rows_of(influxdb, w.dbs[k]) == passed(w.rows),
            120,
            log=f.log_path,
        )
        wait_until(
            f"{key}: every event counted once",
            lambda k=key: status(w.checkpoint(k)).get("input_rows") == len(w.rows),
            60,
            log=f.log_path,
        )
    # pb got step 1 once (the catch-up) and step 2 once; pa only step 2 (it had step 1)
    wanted = {"pa": per_second(step_2), "pb": per_second(step_1 + step_2)}
    for key in host_world.watches:
        host_world.written_once(key, wanted[key])
