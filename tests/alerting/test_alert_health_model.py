"""Platform alerts from the control plane's health model (``platform.registry``): crash-looping, stalled,
lagging and a silent controller each fire once while it lasts and resolve after, read from a real (SQLite)
registry whose status rows say what a controller would have recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alerting.health import CRASH_LOOPING, LAGGING, SILENT, STALLED
from job.control import ControlPlane, Registry
from job.control.models import Cluster, DaggerStatus, Sample
from tests.alerting.alert_setup import model_alert_engine
from tests.job.control.control_seed import bookings_spec, seed

T = 1_772_445_600.0


def status(registry: Registry, dagger_id: int, **values: Any) -> None:
    with registry.session() as s:
        st = s.get(DaggerStatus, dagger_id)
        assert st is not None
        for k, v in values.items():
            setattr(st, k, v)


def beat(registry: Registry, at: float | None) -> None:
    with registry.session() as s:
        for c in s.query(Cluster).filter(Cluster.name == "a-jkt"):
            c.controller_heartbeat = at


def test_model_alerts_fire_once_and_resolve(tmp_path: Path) -> None:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(reg)
    alice = ControlPlane(reg, "alice")
    ids = {n: alice.create("a-jkt", bookings_spec(n), deploy=True).id for n in ("loop", "stall", "lag")}
    clock = [T]
    plane = ControlPlane(reg, "root")
    plane.clock = lambda: clock[0]
    engine, rec = model_alert_engine(plane, tmp_path)

    def fired() -> list[tuple[str, str, str, dict[str, str]]]:
        return [(n.rule, n.previous_level, n.level, n.tags) for n in rec.got]

    def run(at: float) -> None:
        clock[0] = at
        beat(reg, at - 1)
        engine.evaluate_platform(at=at)
        engine.dispatch()

    try:
        running = {"actual_state": "running", "started_at": T - 3000, "restarts": 0, "lag": 10, "lag_at": T}
        for dagger_id in ids.values():
            status(reg, dagger_id, **running, progress={"updated_at": T - 1, "input_rows": 100})
        run(T)
        assert fired() == []
        # loop: crashed, retry in 8 s; stall: no report for 100 s; lag: 2,000 -> 7,100 over 60 s, each batch
        # reading 10 of the ~1,000 records that arrive
        status(
            reg, ids["loop"], actual_state="crashed", restarts=3, next_restart_at=T + 208, last_error="boom"
        )
        status(reg, ids["stall"], progress={"updated_at": T + 100, "input_rows": 100}, lag=50, lag_at=T + 199)
        with reg.session() as s:
            s.add_all(
                Sample(
                    dagger_id=ids["lag"], at=T + 140 + 10 * i, input_rows=100 + 10 * i, lag=2000 + 1000 * i
                )
                for i in range(6)
            )
        status(reg, ids["lag"], progress={"updated_at": T + 199, "input_rows": 160}, lag=7100, lag_at=T + 199)
        run(T + 200)
        run(T + 205)  # still so: no second notification
        assert sorted(fired()) == [
            (CRASH_LOOPING, "OK", "CRIT", {"dagger": "loop"}),
            (LAGGING, "OK", "WARN", {"dagger": "lag"}),
            (STALLED, "OK", "CRIT", {"dagger": "stall"}),
        ]
        # the controller goes silent for 31 s: every dagger is unknown, one alert for the cluster
        rec.got.clear()
        clock[0] = T + 236
        engine.evaluate_platform(at=T + 236)
        engine.dispatch()
        assert sorted(fired()) == [
            (SILENT, "OK", "CRIT", {"cluster": "a-jkt"}),
            (CRASH_LOOPING, "CRIT", "OK", {"dagger": "loop"}),
            (LAGGING, "WARN", "OK", {"dagger": "lag"}),
            (STALLED, "CRIT", "OK", {"dagger": "stall"}),
        ]
        assert [n.message for n in rec.got if n.rule == SILENT] == [
            "the controller of cluster a-jkt is silent"
        ]
        rec.got.clear()
        for dagger_id in ids.values():
            status(
                reg,
                dagger_id,
                **{**running, "lag_at": T + 299},
                progress={"updated_at": T + 299, "input_rows": 900},
            )
        run(T + 300)
        assert fired() == [(SILENT, "CRIT", "OK", {"cluster": "a-jkt"})]
    finally:
        engine.close()
        reg.close()
