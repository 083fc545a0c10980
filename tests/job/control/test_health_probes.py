"""The cluster probes tell a dead part from a slow one: a refused connection is down at once; a part
that does not answer is down only after two probes; a probe's timeout counts only the time the process
had the CPU. Real InfluxDB and broker for the answers; a listening socket that never answers stands in for
a frozen server (as SIGSTOP makes one), a closed port for a dead one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from job.control import health
from job.control.health import count_failures, patient_get, probe_influx, probe_kafka
from job.control.health_model import HealthSettings, cluster_health
from job.stack.ports import free_port


@pytest.fixture
def black_hole() -> Iterator[str]:
    """``127.0.0.1:port`` where a socket accepts connections and never answers (a frozen server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_closed_port_is_refused_and_a_frozen_server_is_not(
    black_hole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fed(monkeypatch)
    closed = f"127.0.0.1:{free_port()}"
    dead = probe_influx(f"http://{closed}", timeout=1.0)
    assert (dead["ok"], dead["refused"]) == (False, True)
    frozen = probe_influx(f"http://{black_hole}", timeout=1.0)
    assert (frozen["ok"], frozen["refused"]) == (False, False) and "Timeout" in frozen["error"]
    assert probe_kafka(closed, timeout=1.0)["refused"] is True
    assert probe_kafka(black_hole, timeout=1.0) | {"error": ""} == {
        "ok": False,
        "bootstrap": black_hole,
        "refused": False,
        "starved": False,
        "error": "",
    }


def test_real_parts_answer(influxdb: Any, tansu_broker: str) -> None:
    assert probe_influx(influxdb.url)["ok"] is True
    assert probe_kafka(tansu_broker)["ok"] is True


def _fed(monkeypatch: pytest.MonkeyPatch, load: float = 0.0) -> None:
    """A process that had the CPU all along, on a machine whose load per core is ``load``."""
    import job.sources.stall as stall

    monkeypatch.setattr(stall, "starvation", lambda: type("Fed", (), {"lost": staticmethod(lambda: 0.0)})())
    monkeypatch.setattr(health, "load_per_core", lambda: load)


def test_a_part_is_down_after_two_unanswered_probes_or_one_refusal(
    black_hole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fed(monkeypatch)
    s, now = HealthSettings(), 1000.0
    ok = {"spark": {"ok": True}, "kafka": {"ok": True}, "influx": {"ok": True}}
    first = count_failures({**ok, "influx": probe_influx(f"http://{black_hole}", timeout=0.5)}, ok)
    assert first["influx"]["failures"] == 1
    assert cluster_health(now, first, now, [], now, s).parts["influx"] == "slow"
    second = count_failures({**ok, "influx": probe_influx(f"http://{black_hole}", timeout=0.5)}, first)
    assert second["influx"]["failures"] == 2
    assert cluster_health(now, second, now, [], now, s).parts["influx"] == "down"
    assert count_failures(ok, second)["influx"]["failures"] == 0
    refused = count_failures(
        {**ok, "influx": probe_influx(f"http://127.0.0.1:{free_port()}", timeout=0.5)}, ok
    )
    assert cluster_health(now, refused, now, [], now, s).parts["influx"] == "down"


class _Starved:
    """A starvation clock that says the process had no CPU for all the time that passed."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def lost(self) -> float:
        return time.monotonic() - self.start


def test_a_starved_process_tries_again_for_the_time_it_lost(
    black_hole: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import job.sources.stall as stall

    calls: list[float] = []
    real_get = requests.get

    def counting_get(url: str, timeout: float) -> requests.Response:
        calls.append(timeout)
        return real_get(url, timeout=timeout)

    monkeypatch.setattr(health.requests, "get", counting_get)
    monkeypatch.setattr(stall, "starvation", _Starved)
    started = time.monotonic()
    with pytest.raises(requests.Timeout):
        patient_get(f"http://{black_hole}/ping", 0.3)
    waited = time.monotonic() - started
    # never served 0.3 s of CPU: it tries again until four times its timeout have passed in wall time (how
    # many tries fit in that depends on how long each took on this machine: at least two)
    assert len(calls) >= 2 and waited >= health.MAX_WAIT_FACTOR * 0.3
    calls.clear()
    _fed(monkeypatch)
    with pytest.raises(requests.Timeout):
        patient_get(f"http://{black_hole}/ping", 0.3)
    assert len(calls) == 1  # fed: its 0.3 s were served, one try


def test_starved_probes_are_slow_never_down(black_hole: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that went unanswered while its process lacked the CPU is ``starved``: however many in a row,
    the part is slow, not down (a false ``kafka down`` came of two such probes at load 45). A probe that had
    the CPU for its timeout, on a machine loaded 3 per core, waits three times its timeout and is real."""
    import job.sources.stall as stall

    s, now = HealthSettings(), 1000.0
    ok = {"spark": {"ok": True}, "kafka": {"ok": True}, "influx": {"ok": True}}
    monkeypatch.setattr(stall, "starvation", _Starved)
    monkeypatch.setattr(health, "load_per_core", lambda: 0.0)
    probes = ok
    for _ in range(3):
        probes = count_failures({**ok, "influx": probe_influx(f"http://{black_hole}", timeout=0.2)}, probes)
        assert probes["influx"]["starved"] is True
        assert probes["influx"]["failures"] == 0
        assert cluster_health(now, probes, now, [], now, s).parts["influx"] == "slow"
    _fed(monkeypatch, load=3.0)
    started = time.monotonic()
    first = count_failures({**ok, "influx": probe_influx(f"http://{black_hole}", timeout=0.2)}, probes)
    assert time.monotonic() - started >= 0.6  # its timeout times the load per core
    assert (first["influx"]["starved"], first["influx"]["failures"]) == (False, 1)
    second = count_failures({**ok, "influx": probe_influx(f"http://{black_hole}", timeout=0.2)}, first)
    assert cluster_health(now, second, now, [], now, s).parts["influx"] == "down"
