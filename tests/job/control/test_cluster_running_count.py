"""A cluster's "daggers running/total" counts the daggers the health model judges live: while its controller is
silent and its daggers are ``unknown``, none of them counts as running (the console's cluster row said
"daggers 2/2")."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.models import Cluster, DaggerStatus
from tests.job.control.control_seed import bookings_spec, seed


def test_unknown_daggers_do_not_count_as_running(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)
    alice = ControlPlane(registry, "alice")
    for name in ("one", "two"):
        alice.create("a-jkt", bookings_spec(name), deploy=True)
    now = time.time()
    with registry.session() as s:
        for st in s.scalars(select(DaggerStatus)):
            st.actual_state, st.started_at = "running", now - 600
            st.progress = {"updated_at": now - 2, "batch_at": now - 2, "input_rows": 100}
        cluster = s.scalars(select(Cluster).where(Cluster.name == "a-jkt")).one()
        cluster.controller_heartbeat = now - 1
    fresh = alice.cluster("a-jkt")
    assert (fresh.daggers_running, fresh.daggers_total) == (2, 2)
    with registry.session() as s:
        s.scalars(select(Cluster).where(Cluster.name == "a-jkt")).one().controller_heartbeat = now - 120
    silent = alice.cluster("a-jkt")
    assert [d.state for d in alice.daggers()] == ["unknown", "unknown"]
    assert (silent.daggers_running, silent.daggers_total) == (0, 2)
    registry.close()
