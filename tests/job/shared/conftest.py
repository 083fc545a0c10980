"""Fixtures of the shared-host tests: a test's world (topic, databases, specs), its host process and the
InfluxDB subscriptions it watches, all stopped when the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from job.shared.channel import HostFolder
from tests.job.shared.host_world import HostProc, HostWorld, World


@pytest.fixture
def host_world(tansu_broker: str, influxdb, tmp_path: Path) -> Iterator[HostWorld]:  # type: ignore[no-untyped-def]
    """A world on the tansu broker and InfluxDB with a host process to start; the host is stopped (its
    processes killed) and the watches closed at the end, whatever the test did."""
    hw = HostWorld(World(tansu_broker, influxdb, tmp_path), HostProc(HostFolder(tmp_path / "host")))
    try:
        yield hw
    finally:
        hw.host.stop()
        for watch in hw.watches.values():
            watch.stop()
