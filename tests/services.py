"""Pytest fixtures that start REAL local services on ports chosen by the OS.

Load them with ``pytest_plugins = ["tests.services"]`` in ``tests/conftest.py`` (the repository root
must be on ``sys.path``: ``pythonpath = ["."]`` in pyproject). Every fixture is session scoped, keeps
its files under a pytest temporary folder (PostgreSQL: a folder of its own under the system temp
dir, which the ``postgres`` user can reach) and stops its process at the end of the session, also
when tests fail or the run is interrupted (Ctrl-C, SIGTERM: a handler stops what is left). Brokers,
InfluxDB and VictoriaMetrics are also started with ``setpriv --pdeathsig KILL``, so even a SIGKILLed
test run does not leave them behind; PostgreSQL (daemonized by ``pg_ctl``) can outlive a SIGKILL.

Fixtures: ``tansu_broker`` and ``noida_broker`` (bootstrap strings), ``broker`` (both kinds, as a
:class:`BrokerHandle`), ``influxdb`` (:class:`InfluxHandle`), ``elasticsearch`` (:class:`ElasticsearchHandle`), ``victoria_metrics``
(:class:`VictoriaHandle`), ``postgres`` (:class:`PostgresHandle`), ``spark_cluster`` (a Spark standalone
master and two workers, :class:`SparkClusterHandle`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import requests

from job.stack.broker import BrokerKind, NoidaBroker, TansuBroker, create_topic
from job.stack.elastic import NoidaElasticsearch
from job.stack.errors import StackError
from job.stack.influx import InfluxServer, influx_query
from job.stack.influx import create_database as _create_database
from job.stack.ports import free_port, free_ports
from job.stack.postgres import PostgresServer
from job.stack.spark_standalone import SparkStandalone
from job.stack.victoria import VictoriaServer
from tests.teardown import slow_teardown

__all__ = [
    "BrokerHandle",
    "ElasticsearchHandle",
    "InfluxHandle",
    "PostgresHandle",
    "SparkClusterHandle",
    "VictoriaHandle",
    "broker",
    "elasticsearch",
    "influxdb",
    "noida_broker",
    "postgres",
    "spark_cluster",
    "tansu_broker",
    "victoria_metrics",
]


class _Server(Protocol):
    def start(self, timeout: float = ...) -> None: ...
    def stop(self, timeout: float = ...) -> None: ...


S = TypeVar("S", bound=_Server)

#: Servers started by these fixtures and not yet stopped, and folders to remove: cleaned up at
#: interpreter exit or on SIGTERM as a last resort (fixture teardown normally does it).
_RUNNING: list[_Server] = []
_FOLDERS: list[Path] = []


@atexit.register
def _stop_leftovers() -> None:
    while _RUNNING:
        with contextlib.suppress(Exception):
            _RUNNING.pop().stop(5.0)
    while _FOLDERS:
        shutil.rmtree(_FOLDERS.pop(), ignore_errors=True)


def _on_sigterm(signum: int, _frame: object) -> None:
    """Stop our services when the test run is terminated, then die of SIGTERM as before."""
    _stop_leftovers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _guard_against_sigterm() -> None:
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        None,
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)


def _start(make: Callable[[], S], attempts: int = 3) -> S:
    """Start ``make()``; when it exits at once (another program took its port first) try new ports."""
    _guard_against_sigterm()
    for attempt in range(attempts):
        server = make()
        processes = getattr(server, "processes", None) or [getattr(server, "process", None)]
        for process in processes:
            if process is not None:  # PostgreSQL is daemonized by pg_ctl and has no ManagedProcess
                process.die_with_parent = True
        try:
            server.start()
        except StackError as exc:
            if attempt == attempts - 1 or "exited" not in str(exc):
                raise
            continue
        _RUNNING.append(server)
        return server
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _serving(make: Callable[[], S]) -> Iterator[S]:
    server = _start(make)
    try:
        yield server
    finally:
        with contextlib.suppress(ValueError):
            _RUNNING.remove(server)
        with slow_teardown(type(server).__name__):
            server.stop(10.0)


# -- brokers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerHandle:
    """A running broker: ``kind`` ("tansu" or "noida") and ``bootstrap`` ("127.0.0.1:<port>")."""

    kind: BrokerKind
    bootstrap: str

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create topic ``name`` (idempotent; on noida with ``retention.ms=-1``) and wait until it is visible."""
        create_topic(self.bootstrap, name, partitions, config, kind=self.kind)


@pytest.fixture(scope="session")
def tansu_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker (memory storage); yields its bootstrap string."""
    root = tmp_path_factory.mktemp("tansu")
    with _serving(lambda: TansuBroker(root, free_port())) as server:
        yield server.bootstrap


@pytest.fixture(scope="session")
def noida_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A noida-db broker (data under a temporary folder); yields its bootstrap string.

    Create topics with ``create_topic(..., kind="noida")`` so old records are not deleted.
    """
    root = tmp_path_factory.mktemp("noida")
    with _serving(lambda: NoidaBroker(root, free_port())) as server:
        yield server.bootstrap


@pytest.fixture(scope="session", params=["tansu", "noida"], ids=["tansu", "noida"])
def broker(request: pytest.FixtureRequest) -> BrokerHandle:
    """Each broker kind in turn (tests using it run twice); a :class:`BrokerHandle`."""
    kind: BrokerKind = request.param
    return BrokerHandle(kind, request.getfixturevalue(f"{kind}_broker"))


# -- InfluxDB ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InfluxHandle:
    """A running influxd 1.6: ``url`` is ``http://127.0.0.1:<port>``."""

    url: str

    def create_database(self, name: str) -> None:
        """Create database ``name`` (idempotent)."""
        _create_database(self.url, name)

    def write(self, lines: str, db: str, precision: str = "ns") -> None:
        """Write line-protocol ``lines`` to ``db`` through ``/write``; raises AssertionError unless 204."""
        resp = requests.post(
            f"{self.url}/write", params={"db": db, "precision": precision}, data=lines.encode(), timeout=30
        )
        assert resp.status_code == 204, f"InfluxDB /write answered {resp.status_code}: {resp.text}"

    def query(self, q: str, db: str | None = None) -> list[dict[str, Any]]:
        """Run InfluxQL ``q`` on ``db``; return the series of all results (each a dict with
        ``name``, ``columns``, ``values`` and maybe ``tags``), ``[]`` when nothing matches.

        Raises StackError when InfluxDB reports an error.
        """
        body = influx_query(self.url, q, db)
        return [series for result in body.get("results", []) for series in result.get("series", [])]


@pytest.fixture(scope="session")
def influxdb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxHandle]:
    """An influxd 1.6 with its files under a temporary folder; an :class:`InfluxHandle`."""
    root = tmp_path_factory.mktemp("influxdb")

    def make() -> InfluxServer:
        port, bind_port = free_ports(2)
        return InfluxServer(root, port, bind_port)

    with _serving(make) as server:
        yield InfluxHandle(server.url)


# -- VictoriaMetrics ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VictoriaHandle:
    """A running VictoriaMetrics: ``url`` is ``http://127.0.0.1:<port>``. It scrapes every second the
    Prometheus targets put in ``targets`` (see :meth:`scrape`)."""

    url: str
    targets: Path | None = None

    def scrape(self, name: str, address: str, **labels: str) -> None:
        """Scrape ``http://<address>/metrics`` every second (as job ``daggers``, with ``labels``) from now on."""
        assert self.targets is not None
        tmp = self.targets / f"{name}.tmp"
        tmp.write_text(json.dumps([{"targets": [address], "labels": labels}]))
        tmp.replace(self.targets / f"{name}.json")

    def unscrape(self, name: str) -> None:
        """Stop scraping the target ``name``."""
        assert self.targets is not None
        (self.targets / f"{name}.json").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def victoria_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaHandle]:
    """A VictoriaMetrics single node with its data under a temporary folder; a :class:`VictoriaHandle`."""
    root = tmp_path_factory.mktemp("victoria")
    targets = root / "targets"
    targets.mkdir()
    scrape = root / "scrape.yml"
    scrape.write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: daggers\n"
        f"    file_sd_configs:\n      - files: ['{targets}/*.json']\n"
    )
    # a query sees the newest sample (the default hides the last 30 s: a test would read what was true then)
    args = (f"-promscrape.config={scrape}", "-promscrape.fileSDCheckInterval=1s", "-search.latencyOffset=0s")
    with _serving(lambda: VictoriaServer(root, free_port(), args)) as server:
        yield VictoriaHandle(server.url, targets)


# -- Elasticsearch (noida-db's REST endpoint) -------------------------------------------------


@dataclass(frozen=True)
class ElasticsearchHandle:
    """A running noida-db Elasticsearch endpoint: ``url`` is ``http://127.0.0.1:<port>``."""

    url: str


@pytest.fixture(scope="session")
def elasticsearch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ElasticsearchHandle]:
    """noida-db's Elasticsearch REST API (data under a temporary folder); an :class:`ElasticsearchHandle`."""
    root = tmp_path_factory.mktemp("elasticsearch")
    with _serving(lambda: NoidaElasticsearch(root, free_port())) as server:
        yield ElasticsearchHandle(server.url)


# -- PostgreSQL --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresHandle:
    """A running PostgreSQL: ``dsn`` is ``postgresql://postgres@127.0.0.1:<port>/postgres`` (trust auth)."""

    dsn: str
    port: int


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresHandle]:
    """A PostgreSQL 15 cluster in a fresh folder under the system temp dir; a :class:`PostgresHandle`.

    pytest's own temp folders are private to the current user, which the ``postgres`` user (needed
    when tests run as root) could not enter, hence a separate, traversable folder.
    """
    base = Path(tempfile.mkdtemp(prefix="daggers-pg-"))
    os.chmod(base, 0o755)
    _FOLDERS.append(base)
    try:
        with _serving(lambda: PostgresServer(base / "pg", free_port())) as server:
            yield PostgresHandle(server.dsn, server.port)
    finally:
        with contextlib.suppress(ValueError):
            _FOLDERS.remove(base)
        shutil.rmtree(base, ignore_errors=True)


# -- Spark standalone cluster ------------------------------------------------------------------


@dataclass(frozen=True)
class SparkClusterHandle:
    """A running Spark standalone cluster: ``master`` (``spark://127.0.0.1:<port>``), ``ui`` (the master's
    web UI; its JSON state is ``<ui>/json/``), ``worker_uis`` (one per worker; ``<url>/json/`` lists the
    worker's executors), ``work_dir`` (``SPARK_WORKER_DIR``: ``<app id>/<executor id>/stderr``), and
    ``cores`` and ``memory_mb`` that each worker offers."""

    master: str
    ui: str
    worker_uis: tuple[str, ...]
    work_dir: Path
    cores: int
    memory_mb: int

    def state(self) -> dict[str, Any]:
        """The master's JSON state: workers, ``activeapps``, ``completedapps``."""
        resp = requests.get(f"{self.ui}/json/", timeout=10)
        resp.raise_for_status()
        state: dict[str, Any] = resp.json()
        return state

    def wait_idle(self, timeout: float = 180.0) -> None:
        """Wait until no application holds cores (a test before may have just finished one)."""
        deadline = time.monotonic() + timeout
        while (state := self.state())["activeapps"] or state["coresused"]:
            assert time.monotonic() < deadline, f"the Spark cluster stays busy: {state['activeapps']}"
            time.sleep(0.5)

    def worker_state(self, index: int) -> dict[str, Any]:
        """Worker ``index``'s JSON state: ``executors`` (running) and ``finishedexecutors``."""
        resp = requests.get(f"{self.worker_uis[index]}/json/", timeout=10)
        resp.raise_for_status()
        state: dict[str, Any] = resp.json()
        return state


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkClusterHandle]:
    """A Spark master and two workers (1 core and 1 GiB each) from the pyspark wheel, on OS ports; a
    :class:`SparkClusterHandle` once both workers are ALIVE in the master's JSON."""
    root = tmp_path_factory.mktemp("spark-cluster")

    def make() -> SparkStandalone:
        from job.spark import jvm_archive  # the daemons map the classes the tests' JVMs map (pyspark)

        port, ui, *worker_uis = free_ports(4)
        return SparkStandalone(
            root, port, ui, worker_uis, cores=1, memory="1g", daemon_java_options=jvm_archive.java_options()
        )

    with _serving(make) as server:
        yield SparkClusterHandle(
            server.master_url,
            server.ui_url,
            tuple(server.worker_ui_urls),
            root / "work",
            cores=1,
            memory_mb=1024,
        )
