"""A Spark standalone cluster (one master, N workers) started from the pyspark wheel on 127.0.0.1.

The wheel ships ``bin/spark-class`` (``SPARK_HOME`` is the pyspark package folder), which starts the
master (``org.apache.spark.deploy.master.Master``) and the workers
(``org.apache.spark.deploy.worker.Worker``) in the foreground. Each runs as a
:class:`~job.stack.process.ManagedProcess` (its own process group, logged to a file). The cluster is
healthy once every worker is ``ALIVE`` in the master's JSON (``http://127.0.0.1:<webui>/json/``).

``SPARK_LOCAL_IP=127.0.0.1`` keeps the JVMs off the machine's external address; the workers inherit
``PYTHONPATH`` (with the repository first), so the executors' Python workers import this ``job``
package, as a dagger's source and UDFs need.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests

from job.stack.errors import StackError
from job.stack.process import ManagedProcess

_REPO = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    """Return the pyspark package folder (a core dependency), which holds ``bin/spark-class`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def master_state(ui_url: str, timeout: float = 2.0) -> dict[str, Any]:
    """Return the master's JSON state (workers, active and completed applications).

    Raises:
        StackError: the master's web UI does not answer with JSON.
    """
    try:
        resp = requests.get(f"{ui_url}/json/", timeout=timeout)
        resp.raise_for_status()
        state: dict[str, Any] = resp.json()
    except (requests.RequestException, ValueError) as exc:
        raise StackError(f"the Spark master at {ui_url} does not answer: {exc}") from exc
    return state


class SparkStandalone:
    """A master on ``127.0.0.1:port`` (web UI ``ui_port``) and one worker per ``worker_ui_ports`` entry,
    each offering ``cores`` cores and ``memory`` (a Spark size, e.g. ``1g``) to applications.

    ``root`` holds ``logs/`` (``SPARK_LOG_DIR``), ``work/`` (``SPARK_WORKER_DIR``: the executors'
    stdout and stderr, per application) and one log file per process. ``daemon_memory`` is the heap of
    the master and worker JVMs themselves (``SPARK_DAEMON_MEMORY``); ``daemon_java_options`` more options
    of theirs (e.g. the class archive of :mod:`job.spark.jvm_archive`: the three JVMs of a two-worker
    cluster then start on 7.5 instead of 10.9 core-s).
    """

    def __init__(
        self,
        root: Path,
        port: int,
        ui_port: int,
        worker_ui_ports: Sequence[int],
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "256m",
        daemon_java_options: Sequence[str] = (),
        die_with_parent: bool = False,
    ) -> None:
        self.root = Path(root)
        self.port = port
        self.ui_port = ui_port
        self.worker_ui_ports = list(worker_ui_ports)
        self.cores = cores
        self.memory = memory
        home = spark_home()
        spark_class = str(home / "bin" / "spark-class")
        pythonpath = os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)
        env = {
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_WORKER_DIR": str(self.root / "work"),
            "SPARK_DAEMON_MEMORY": daemon_memory,
            "PYTHONPATH": pythonpath,
        }
        # the options Daggers gives its own JVMs (job.spark.session.JVM_OPTIONS_ENV; that module imports pyspark)
        daemon = " ".join(
            filter(
                None,
                (
                    os.environ.get("SPARK_DAEMON_JAVA_OPTS"),
                    shlex.join(daemon_java_options),
                    os.environ.get("DAGGERS_JVM_OPTIONS"),
                ),
            )
        )
        if daemon:
            env["SPARK_DAEMON_JAVA_OPTS"] = daemon
        self.master = ManagedProcess(
            "the Spark master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui_port),
            ],
            log_path=self.root / "master.log",
            env=env,
        )
        self.workers = [
            ManagedProcess(
                f"Spark worker {i + 1}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(wport),
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    self.master_url,
                ],
                log_path=self.root / f"worker-{i + 1}.log",
                env=env,
            )
            for i, wport in enumerate(self.worker_ui_ports)
        ]
        for proc in self.processes:
            proc.die_with_parent = die_with_parent

    @property
    def processes(self) -> list[ManagedProcess]:
        """The master, then the workers."""
        return [self.master, *self.workers]

    @property
    def master_url(self) -> str:
        """The URL applications connect to: ``spark://127.0.0.1:<port>``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI (and JSON state at ``/json/``): ``http://127.0.0.1:<ui_port>``."""
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def worker_ui_urls(self) -> list[str]:
        """Each worker's web UI; its ``/json/`` lists the executors it runs and has run.

        As the master lists them: a worker whose UI port was taken meanwhile binds the next one (Spark's
        retry), so the ports asked for are only the fallback when the master does not answer."""
        try:
            listed = [
                str(w["webuiaddress"])
                for w in self.state().get("workers") or []
                if w.get("state") == "ALIVE" and w.get("webuiaddress")
            ]
        except StackError:
            listed = []
        return (
            listed
            if len(listed) == len(self.workers)
            else [f"http://127.0.0.1:{p}" for p in self.worker_ui_ports]
        )

    def state(self, timeout: float = 2.0) -> dict[str, Any]:
        """Return the master's JSON state (see :func:`master_state`)."""
        return master_state(self.ui_url, timeout)

    def alive_workers(self) -> int:
        """Return how many workers the master lists as ``ALIVE`` (0 when it does not answer)."""
        try:
            return sum(1 for w in self.state().get("workers") or [] if w.get("state") == "ALIVE")
        except StackError:
            return 0

    def start(self, timeout: float = 120.0) -> None:
        """Start the master, wait for its web UI, start the workers and wait until all are ALIVE.

        On failure everything started is stopped again.

        Raises:
            StackError: a process exits or the cluster is not complete within ``timeout`` seconds (with
                the last lines of the log of the process that failed).
        """
        try:
            self.master.start()
            self.master.wait_healthy(lambda: bool(self.state()), timeout=timeout, interval=0.5)
            for worker in self.workers:
                worker.start()
            for worker in self.workers:
                worker.wait_healthy(
                    lambda: self.alive_workers() == len(self.workers), timeout=timeout, interval=0.5
                )
        except StackError:
            self.stop(5.0)
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers (and the executors they run), then the master; each by process group."""
        for proc in [*self.workers, self.master]:
            with contextlib.suppress(StackError):
                proc.stop(timeout)
