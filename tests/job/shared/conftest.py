"""Fixtures of the shared-host tests: a test's world (topic, databases, specs), its host process and the
InfluxDB subscriptions it watches, all stopped when the test ends; or, for the tests of a module that share
one host process (``module_host_world``), the host stopped when the module ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from job.shared.channel import HostFolder
from tests.job.shared.host_world import HostProc, HostWorld, ModuleHost, World


@pytest.fixture
def host_world(tansu_broker: str, influxdb, tmp_path: Path) -> Iterator[HostWorld]:  # type: ignore[no-untyped-def]
    """A world on the tansu broker and InfluxDB with a host process to start; the host's processes are
    killed (no graceful stop: nothing checks it) and the watches closed at the end, whatever the test did."""
    hw = HostWorld(World(tansu_broker, influxdb, tmp_path), HostProc(HostFolder(tmp_path / "host")))
    try:
        yield hw
    finally:
        hw.host.kill()
        for watch in hw.watches.values():
            watch.stop()


@pytest.fixture(scope="module")
def module_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleHost]:
    """One host process for the tests of a module (started by the first that starts it), killed at the
    module's end."""
    host = ModuleHost(HostFolder(tmp_path_factory.mktemp("module-host") / "host"))
    try:
        yield host
    finally:
        host.kill()


@pytest.fixture
def module_host_world(  # type: ignore[no-untyped-def]
    module_host: ModuleHost, tansu_broker: str, influxdb, tmp_path: Path
) -> Iterator[HostWorld]:
    """A world of the test's own (topic, databases, specs) on the module's host: the test's daggers are
    unassigned and stopped at its end, the host runs on for the next test."""
    module_host.begin()
    hw = HostWorld(World(tansu_broker, influxdb, tmp_path), module_host)
    try:
        yield hw
    finally:
        for watch in hw.watches.values():
            watch.stop()
        module_host.leave()
