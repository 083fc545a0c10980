"""Shared fixtures: real services come from tests/services.py (started on OS-assigned ports)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from job.spark.session import JVM_OPTIONS_ENV
from tests.teardown import slow_teardown

pytest_plugins = ["tests.services"]

# The tests' JVMs (in-process sessions, daggers, shared hosts: the environment reaches them all) live a few
# minutes, during which C2, the optimising JIT compiler, spends more CPU than it saves. C1 only: 12% less
# time for tests/job/test_engine_recovery.py and test_run_cli.py on an idle machine. With the class archive
# (setup.sh), the whole suite on a clean clone (-n 3, two cores): 3,101 → 2,278 s of test time, 17:36 → 13:11.
# What the daggers compute does not change; a deployed dagger keeps both compilers.
# C1 alone gets a code cache of 48 MB (tiered compilation reserves 240): the session's JVM, which compiles the
# generated code of hundreds of queries, filled it in CI ("CodeCache is full. Compiler has been disabled"),
# and then ended at an uncaught error in a task thread. It gets the tiered size.
# The serial collector: a test's JVM has little garbage and no pause to keep short, and G1's threads cost
# 5% of the CPU of tests/job/test_engine.py and test_engine_recovery.py (114-120 → 106-114 core-s).
os.environ.setdefault(
    JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the in-process dagger runs of the whole test session.

    Its streaming queries' Python source runners are forked from a fork server, as a shared host's are
    (:mod:`job.shared.forkserver`): the session runs hundreds of queries, each of which started one that
    imported pyspark, pyarrow and the Kafka source again (~0.6 core-s). Only the session's Python processes
    get the server's environment (through its settings, :func:`job.shared.forkserver.spark_conf`: a test
    that ran earlier in this process may have launched the JVM): the daggers the tests start as processes
    of their own start theirs as a deployed dagger does."""
    from job.shared import forkserver
    from job.spark.session import build_session

    keys = ("PYSPARK_PYTHON", forkserver.PYTHON_ENV, forkserver.SOCKET_ENV, forkserver.CLIENT_ENV)
    saved = {k: os.environ.get(k) for k in keys}
    fork = forkserver.start()
    try:
        session = build_session(
            "daggers-tests",
            master="local[2]",
            shuffle_partitions=2,
            extra={"spark.driver.memory": "3g", **forkserver.spark_conf()},
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    yield session
    with slow_teardown("the tests' SparkSession"):
        session.stop()
    if fork is not None:
        with slow_teardown("the SparkSession's fork server"):
            fork[0].terminate()
            fork[0].wait(30)


#: The fixtures that start a real service (tests/services.py, the session's Spark): a test that uses one,
#: directly or through another fixture, is marked ``integration`` (scripts/check.sh runs the others).
SERVICE_FIXTURES = frozenset(
    {
        "spark",
        "spark_cluster",
        "broker",
        "tansu_broker",
        "noida_broker",
        "influxdb",
        "victoria_metrics",
        "elasticsearch",
        "postgres",
    }
)
#: Test modules one xdist worker runs together (``-n N --dist loadfile``), by the name of what they share: the
#: four that use the session's standalone cluster start it once (a master and two workers, ~8 core-s and
#: 1.5 GB) instead of once on each worker that drew one of them. tests/test_scheduling.py keeps it true.
SAME_WORKER: dict[str, tuple[str, ...]] = {
    "spark_cluster": (
        "tests/job/shared/test_host_on_cluster.py",
        "tests/job/test_cluster_run.py",
        "tests/job/control/test_control_health.py",
        "tests/tui/test_tui_cluster_health.py",
    ),
}
_SCOPE = {path: name for name, paths in SAME_WORKER.items() for path in paths}
#: Each test module's seconds in a clean-clone CI run (scripts/test_durations.py writes it).
DURATIONS = Path(__file__).with_name("durations.json")
#: Where a module that is not in DURATIONS goes: one marked slow as if it took this long, one with an
#: integration test (a service to start, often a dagger to wait for) as if it took the median module's time,
#: others (unit tests, a second or two a module) last.
UNKNOWN_SLOW_S = 60.0
UNKNOWN_INTEGRATION_S = 20.0


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects: it sees the markers added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses a service fixture (:data:`SERVICE_FIXTURES`) ``integration``; run the
    longest modules first (a stable sort keeps each module's tests together, in their order).

    With ``-n N --dist loadfile --no-loadscope-reorder`` (xdist otherwise orders modules by their number of
    tests, which puts the one-test modules with minute-long outages last) a worker takes the next module
    when it is free: longest first, the workers end within seconds of each other instead of one finishing
    a long module while the others are idle (a clean-clone run: 821 s in the order of the slow marker,
    790 s simulated longest first). The seconds come from ``tests/durations.json``; a module not in it
    counts as ``UNKNOWN_SLOW_S`` when marked slow, ``UNKNOWN_INTEGRATION_S`` when it has an integration
    test, else 0: a new module that starts services never runs in the last minutes, after the unit tests.
    """
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
    try:
        seconds: dict[str, float] = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        seconds = {}
    root = Path(str(config.rootpath))
    unknown: dict[str, float] = {}  # module name -> the seconds it counts as
    for item in items:
        if item.module is None:
            continue
        if item.get_closest_marker("slow") is not None:
            guess = UNKNOWN_SLOW_S
        elif item.get_closest_marker("integration") is not None:
            guess = UNKNOWN_INTEGRATION_S
        else:
            continue
        unknown[item.module.__name__] = max(guess, unknown.get(item.module.__name__, 0.0))

    def expected(item: pytest.Item) -> float:
        path = Path(str(item.path)).relative_to(root).as_posix() if item.path else ""
        if path in seconds:
            return seconds[path]
        return unknown.get(item.module.__name__, 0.0) if item.module is not None else 0.0

    items.sort(key=lambda item: -expected(item))


def pytest_configure(config: pytest.Config) -> None:
    """With ``DAGGERS_TEST_CPU=PREFIX``, record each test's core-seconds (tests/cpu_usage.py)."""
    prefix = os.environ.get("DAGGERS_TEST_CPU")
    if prefix:
        from tests.cpu_usage import CpuUsage

        config.pluginmanager.register(CpuUsage(prefix), "daggers-cpu-usage")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``--dist loadfile``, a module is a unit of work, except the modules of one :data:`SAME_WORKER`
    group, which are one unit together; other modes keep xdist's scheduler."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Grouped(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return _SCOPE.get(path, path)

    return Grouped(config, log)  # type: ignore[arg-type]
