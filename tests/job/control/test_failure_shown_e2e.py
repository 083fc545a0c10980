"""Real daggers that fail on a known error, started by the controller: a dedicated one (its own launch.py
process and Spark application) and two in a real shared host (a query of its own, and a fused group's member),
each reading a real broker (tansu) and writing to an InfluxDB that does not answer (``http://127.0.0.1:9``, no
retries). The controller shows
exactly the title, message and hint of the failure record each run wrote: the dedicated dagger's in its folder,
the hosted ones' in the host's state file of each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller, ControllerSettings
from job.control.views import DaggerView
from job.query.failure_record import FailureRecord, read_failure
from job.shared.channel import HostFolder
from job.stack.broker import create_topic
from tests.helpers import unique, wait_until
from tests.job.control.control_seed import bookings_spec, seed

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TITLE = "Sink error"
MESSAGE = "sink 'influx': InfluxDB at http://127.0.0.1:9 is unreachable: ConnectionError"
HINT = "start the local stack with `daggers up`, or set the sink's url to your InfluxDB"
SHOWN = f"{TITLE}: {MESSAGE}\nhint: {HINT}"


def spec(name: str, topic: str, isolation: str) -> str:
    """The bookings dagger on the cluster's broker and InfluxDB (port 9: no answer), its sink not retried."""
    return bookings_spec(name, topic=topic) + "  max_retries: 0\n" + f"isolation: {isolation}\n"


@pytest.fixture
def world(tansu_broker: str, tmp_path: Path) -> Iterator[tuple[ControlPlane, Controller]]:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry, kafka=tansu_broker)
    settings = ControllerSettings(
        poll_interval_s=0.5, health_interval_s=3600, lag_interval_s=3600, max_restarts=0, standby=False
    )
    ctl = Controller(registry, "a-jkt", tmp_path / "state", settings=settings)
    ctl.claim()
    try:
        yield ControlPlane(registry, "alice"), ctl
    finally:
        ctl.stop_all(60)
        ctl.close()
        registry.close()


def test_a_real_dagger_and_hosted_ones_show_the_record_of_their_failure(
    world: tuple[ControlPlane, Controller], tansu_broker: str, tmp_path: Path
) -> None:
    alice, ctl = world
    topic = unique("failing")
    create_topic(tansu_broker, topic, 1)
    names = {"alone": "dedicated", "hosted": "shared", "fused-one": "fused"}
    for name, isolation in names.items():
        alice.create("a-jkt", spec(name, topic, isolation), deploy=True)

    def all_failed() -> dict[str, DaggerView] | None:
        ctl.reconcile_once()
        views = {name: alice.dagger(name) for name in names}
        return views if all(v.actual_state == "failed" for v in views.values()) else None

    views = wait_until(
        "the three daggers failed", all_failed, 300, log=tmp_path / "state" / "shared" / "host-0" / "host.log"
    )
    records: dict[str, FailureRecord | None] = {
        "alone": read_failure(Path(views["alone"].checkpoint).parent),
    }
    host = HostFolder(tmp_path / "state" / "shared" / "host-0")
    for name in ("hosted", "fused-one"):
        state = host.state(f"{views[name].id}-{name}") or {}
        assert state.get("state") == "failed" and state.get("error") == SHOWN, state
        records[name] = FailureRecord.from_json(state.get("failure"))
    for name, view in views.items():
        record = records[name]
        assert record is not None and (record.title, record.message, record.hint, record.exit_code) == (
            TITLE,
            MESSAGE,
            HINT,
            2,
        ), name
        assert (view.last_error, view.last_exit_code) == (SHOWN, 2), name
