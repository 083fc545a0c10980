"""Fused daggers (``isolation: fused``, :mod:`job.shared.fusion`) in ONE shared host process, on a real
broker (tansu), a real InfluxDB and real Spark, driven through the host's assignment files.

* Three daggers on one topic run as one streaming query; each writes exactly the windows of the events to
  its own database, and has its own ``status.json`` with every event counted.
* A member whose sink becomes unreachable fails alone; the others' windows stay exact.
* A dagger deployed into the group, one edited and one removed: the group's next generation reads the
  topic again from the oldest open window, so the members that stay have every window exactly once (no
  gap, no double), and the new one has every window from where it joined.
* SIGKILL of the JVM: a new host resumes the same generation from its checkpoint, exactly.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from job.shared.channel import HostFolder
from tests.job.control.test_control_e2e import DELAY_MS, closed, wait_for
from tests.job.shared.host_world import HostProc, status, windows
from tests.job.shared.relay import Relay
from tests.job.shared.test_host_isolation import World

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FUSED = "isolation: fused\nlight: true\n"
WINDOW_S = 60


def group_file(folder: HostFolder) -> dict:
    (path,) = (folder.root / "groups").glob("*/group.json")
    return json.loads(path.read_text())


def test_fused_daggers_share_one_query_and_each_stays_exact(tansu_broker: str, influxdb,  # type: ignore[no-untyped-def]
                                                           tmp_path: Path) -> None:
    w = World(tansu_broker, influxdb, tmp_path)
    relay = Relay(int(influxdb.url.rsplit(":", 1)[1]))
    host = HostProc(HostFolder(tmp_path / "host"))
    f = host.folder
    host.start()
    try:
        host.ready()
        w.step(0)
        for key in ("fa", "fb"):
            f.assign(key, w.spec(key, extra=FUSED), tmp_path, f"{key}-1")
        f.assign("fs", w.spec("fs", extra=FUSED, influx_url=f"http://127.0.0.1:{relay.port}",
                              sink_extra="  max_retries: 1\n  timeout_s: 2\n"), tmp_path, "fs-1")
        for key in ("fa", "fb", "fs"):
            w.exact(key, host)
        # one query for the three: one group, one generation, each member's state names it
        group = group_file(f)
        assert group["generation"] == 1 and group["members"] == {"fa": "fa-1", "fb": "fb-1", "fs": "fs-1"}
        states = {k: host.dagger(k) for k in ("fa", "fb", "fs")}
        assert {s["state"] for s in states.values()} == {"running"}
        assert len({s["group"] for s in states.values()}) == 1, states
        ids = {json.loads((w.checkpoint(k) / "query.json").read_text())["id"] for k in ("fa", "fb", "fs")}
        assert len(ids) == 1, ids

        # fs's sink becomes unreachable: it fails alone
        relay.cut()
        w.step(1)
        failed = host.wait_state("fs", "failed")
        assert failed["error"].startswith(f"Sink error: giving up writing to InfluxDB at http://127.0.0.1:{relay.port}"), failed
        assert status(w.checkpoint("fs"))["state"] == "failed"
        for key in ("fa", "fb"):
            w.exact(key, host)
        # the group went on without it (a new generation, from the oldest open window)
        before = closed(w.rows)
        watermark_s = max(r["event_timestamp"].timestamp() for r in w.rows) - DELAY_MS / 1000
        joined_s = int(watermark_s) // WINDOW_S * WINDOW_S

        # deploy fc, edit fb (a new token), remove fs: a new generation; fa and fb lose no window
        f.assign("fc", w.spec("fc", extra=FUSED), tmp_path, "fc-1")
        f.assign("fb", w.spec("fb", 2, extra=FUSED), tmp_path, "fb-2")
        f.unassign("fs")
        host.wait_state("fb", "running", token="fb-2")
        wait_for("the group's new members", lambda: group_file(f)["members"] == {"fa": "fa-1", "fb": "fb-2",
                                                                                "fc": "fc-1"}, 120, f.log_path)
        group = group_file(f)
        assert group["start_ms"] == joined_s * 1000, (group, joined_s)
        w.step(2)
        for key in ("fa", "fb"):
            w.exact(key, host)
        want_c = {k: v for k, v in closed(w.rows).items() if k[0] - WINDOW_S >= joined_s}
        assert want_c and len(want_c) < len(closed(w.rows))
        wait_for("fc: every window since it joined", lambda: windows(influxdb, w.dbs["fc"]) == want_c, 120,
                 f.log_path)
        # fs stays failed (removed, as a failed dagger of its own would be), with the windows it wrote before
        assert host.dagger("fs")["state"] == "failed"
        written = windows(influxdb, w.dbs["fs"])
        assert written and written == {k: v for k, v in before.items() if k in written}

        # SIGKILL of the JVM: a new host resumes the same generation, exactly
        generation = group_file(f)["generation"]
        w.step(3)
        os.kill(host.jvm_pid(), signal.SIGKILL)
        assert host.popen is not None and host.popen.wait(60) == 3
        host.start()
        host.ready()
        w.step(4)
        for key in ("fa", "fb"):
            w.exact(key, host)
        want_c = {k: v for k, v in closed(w.rows).items() if k[0] - WINDOW_S >= joined_s}
        wait_for("fc: exact after the restart", lambda: windows(influxdb, w.dbs["fc"]) == want_c, 120, f.log_path)
        assert group_file(f)["generation"] == generation
        assert host.stop() == 0
        for key in ("fa", "fb", "fc"):
            assert host.dagger(key)["state"] == "stopped" and status(w.checkpoint(key))["state"] == "stopped"
    finally:
        relay.cut()
        host.stop()
