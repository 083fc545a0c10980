"""The local stack behind ``daggers up`` / ``down`` / ``status``: one Kafka-protocol broker and InfluxDB.

State lives in one folder (``$DAGGERS_HOME`` or ``./.daggers``)::

    <state>/broker/      broker.log, broker.pid, data/ (noida)
    <state>/influxdb/    influxd.log, influxd.pid, meta/, data/, wal/
    <state>/stack.json   which broker, ports, PIDs (with start times), addresses, log paths

``up`` is idempotent: services recorded as running and healthy are left alone, dead ones are
started again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from job.stack.broker import BROKER_KINDS, BrokerKind, kafka_ready, make_broker
from job.stack.errors import StackError
from job.stack.influx import InfluxServer, create_database, influx_ping
from job.stack.ports import free_port, port_in_use
from job.stack.process import ManagedProcess

__all__ = ["LocalStack", "ServiceStatus", "StackError", "StackStatus", "default_state_dir"]

HOST = "127.0.0.1"
STATE_FILE = "stack.json"
STATE_VERSION = 1


def default_state_dir() -> Path:
    """Return ``$DAGGERS_HOME`` if set, else ``./.daggers``, as an absolute path."""
    return Path(os.environ.get("DAGGERS_HOME") or ".daggers").expanduser().absolute()


@dataclass
class ServiceStatus:
    """One service of the stack as seen now.

    ``name`` is "broker" or "influxdb"; ``kind`` is "tansu", "noida" or "influxdb". ``running`` means
    the recorded process exists; ``healthy`` that it also answers (metadata request / ``/ping``).
    ``pid`` is the recorded PID (also when the process is gone).
    """

    name: str
    kind: str
    pid: int | None
    address: str
    port: int
    running: bool
    healthy: bool
    log_path: Path | None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (paths as strings)."""
        data = asdict(self)
        data["log_path"] = str(self.log_path) if self.log_path else None
        return data


@dataclass
class StackStatus:
    """The whole stack: its state folder and its services (empty when nothing was started)."""

    state_dir: Path
    services: list[ServiceStatus] = field(default_factory=list)
    database: str | None = None

    @property
    def healthy(self) -> bool:
        """True when the stack has services and all of them are healthy."""
        return bool(self.services) and all(s.healthy for s in self.services)

    def service(self, name: str) -> ServiceStatus | None:
        """Return the service called ``name`` ("broker", "influxdb"), or None."""
        return next((s for s in self.services if s.name == name), None)

    @property
    def bootstrap(self) -> str | None:
        """The broker's ``bootstrap.servers`` string, or None."""
        broker = self.service("broker")
        return broker.address if broker else None

    @property
    def influx_url(self) -> str | None:
        """InfluxDB's base URL, or None."""
        influx = self.service("influxdb")
        return influx.address if influx else None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict: state_dir, healthy, database, bootstrap, influx_url, services."""
        return {
            "state_dir": str(self.state_dir),
            "healthy": self.healthy,
            "database": self.database,
            "bootstrap": self.bootstrap,
            "influx_url": self.influx_url,
            "services": [s.to_dict() for s in self.services],
        }


class LocalStack:
    """Start, stop and inspect the local broker + InfluxDB recorded under ``state_dir``."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir).absolute() if state_dir is not None else default_state_dir()
        self.broker_dir = self.state_dir / "broker"
        self.influx_dir = self.state_dir / "influxdb"
        self.state_path = self.state_dir / STATE_FILE
        self._started: dict[int, ManagedProcess] = {}  # processes started by this object, by PID

    # -- state file --------------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StackError(f"cannot read {self.state_path}: {exc}; delete it if no service runs") from exc
        return data if isinstance(data, dict) else {}

    def _write_state(self, state: dict[str, Any]) -> None:
        state["version"] = STATE_VERSION
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / ".lock").open("w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _process(self, name: str, rec: dict[str, Any], pid_path: Path) -> ManagedProcess:
        pid = int(rec.get("pid") or 0)
        started = self._started.get(pid)
        if started is not None:
            return started
        return ManagedProcess.attach(
            name, pid, start_time=rec.get("start_time"), log_path=Path(rec.get("log", "")), pid_path=pid_path
        )

    # -- up ----------------------------------------------------------------------------------

    def up(
        self,
        broker: BrokerKind = "tansu",
        broker_port: int = 9092,
        influx_port: int = 8086,
        database: str = "daggers",
        *,
        timeout: float = 60.0,
    ) -> StackStatus:
        """Start the broker and InfluxDB (if not already running) and create the InfluxDB ``database``.

        Returns the status after start. Running, healthy services recorded in ``stack.json`` are kept
        (same PIDs); recorded services that died are started again.

        Raises:
            StackError: unknown broker; a port is taken by another program; the stack already runs
                with another broker or port; a service does not start (with its log's last lines).
        """
        if broker not in BROKER_KINDS:
            raise StackError(f"unknown broker {broker!r}: choose {' or '.join(BROKER_KINDS)}")
        with self._locked():
            state = self._read_state()
            self._up_broker(state, broker, broker_port, timeout)
            self._up_influx(state, influx_port, broker_port, timeout)
            state["influxdb"]["database"] = database
            self._write_state(state)
            create_database(f"http://{HOST}:{influx_port}", database)
        return self.status()

    def _keep_running(
        self,
        name: str,
        rec: dict[str, Any] | None,
        pid_path: Path,
        want: dict[str, Any],
        check: Any,
        timeout: float,
    ) -> bool:
        """Return True when the recorded service runs healthy with the wanted settings; stop it if it is stuck."""
        if not rec:
            return False
        proc = self._process(name, rec, pid_path)
        if not proc.alive():
            return False
        for key, value in want.items():
            if rec.get(key) != value:
                raise StackError(
                    f"{name} already runs with {key} {rec.get(key)} (pid {proc.pid}); "
                    f"run `daggers down` first to start it with {key} {value}"
                )
        try:
            proc.wait_healthy(check, timeout)
        except StackError:
            proc.stop(timeout=10.0)  # alive but not answering: start it again
            return False
        return True

    def _up_broker(self, state: dict[str, Any], kind: BrokerKind, port: int, timeout: float) -> None:
        rec = state.get("broker")
        bootstrap = f"{HOST}:{port}"
        if self._keep_running(
            "the broker",
            rec,
            self.broker_dir / "broker.pid",
            {"kind": kind, "port": port},
            lambda: kafka_ready(bootstrap, 5.0),
            timeout,
        ):
            return
        if port_in_use(HOST, port):
            raise StackError(
                f"port {port} for the broker is already in use by another program; pass --broker-port"
            )
        server = make_broker(kind, self.broker_dir, port)
        server.start(timeout)
        self._started[server.process.pid or 0] = server.process
        state["broker"] = {
            "kind": kind,
            "port": port,
            "address": server.bootstrap,
            "pid": server.process.pid,
            "start_time": server.process.start_time,
            "log": str(server.process.log_path),
        }
        self._write_state(state)

    def _up_influx(self, state: dict[str, Any], port: int, broker_port: int, timeout: float) -> None:
        rec = state.get("influxdb")
        url = f"http://{HOST}:{port}"
        if self._keep_running(
            "InfluxDB",
            rec,
            self.influx_dir / "influxd.pid",
            {"port": port},
            lambda: influx_ping(url, 2.0),
            timeout,
        ):
            return
        if port_in_use(HOST, port):
            raise StackError(
                f"port {port} for InfluxDB is already in use by another program; pass --influx-port"
            )
        bind_port = int((rec or {}).get("bind_port") or 0)
        while not bind_port or bind_port in (port, broker_port) or port_in_use(HOST, bind_port):
            bind_port = free_port(HOST)
        server = InfluxServer(self.influx_dir, port, bind_port)
        server.start(timeout)
        self._started[server.process.pid or 0] = server.process
        state["influxdb"] = {
            "kind": "influxdb",
            "port": port,
            "bind_port": bind_port,
            "address": server.url,
            "pid": server.process.pid,
            "start_time": server.process.start_time,
            "log": str(server.process.log_path),
        }
        self._write_state(state)

    # -- down --------------------------------------------------------------------------------

    def down(self, timeout: float = 10.0) -> None:
        """Stop InfluxDB and the broker recorded in ``stack.json``, wait until they are gone, and
        remove ``stack.json``. Data folders are kept. Does nothing when no stack is recorded.

        Raises:
            StackError: a process cannot be stopped.
        """
        if not self.state_dir.is_dir():
            return
        with self._locked():
            state = self._read_state()
            for key, name, pid_path in (
                ("influxdb", "InfluxDB", self.influx_dir / "influxd.pid"),
                ("broker", "the broker", self.broker_dir / "broker.pid"),
            ):
                rec = state.get(key)
                if not rec:
                    continue
                proc = self._process(name, rec, pid_path)
                proc.stop(timeout)
                self._started.pop(proc.pid or 0, None)
                del state[key]
                self._write_state(state)
            with contextlib.suppress(FileNotFoundError):
                self.state_path.unlink()

    # -- status ------------------------------------------------------------------------------

    def status(self, timeout: float = 5.0) -> StackStatus:
        """Return what runs now: for each recorded service, whether its process lives and answers.

        Returns a StackStatus with no services when nothing is recorded.

        Raises:
            StackError: ``stack.json`` cannot be read.
        """
        state = self._read_state()
        result = StackStatus(self.state_dir, database=(state.get("influxdb") or {}).get("database"))
        for key, name, pid_path in (
            ("broker", "the broker", self.broker_dir / "broker.pid"),
            ("influxdb", "InfluxDB", self.influx_dir / "influxd.pid"),
        ):
            rec = state.get(key)
            if not rec:
                continue
            proc = self._process(name, rec, pid_path)
            running = proc.alive()
            address = str(rec.get("address", ""))
            if not running:
                healthy = False
            elif key == "broker":
                healthy = kafka_ready(address, timeout)
            else:
                healthy = influx_ping(address, timeout)
            result.services.append(
                ServiceStatus(
                    name=key,
                    kind=str(rec.get("kind", key)),
                    pid=proc.pid,
                    address=address,
                    port=int(rec.get("port", 0)),
                    running=running,
                    healthy=healthy,
                    log_path=Path(rec["log"]) if rec.get("log") else None,
                )
            )
        return result
