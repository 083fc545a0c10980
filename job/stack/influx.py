"""InfluxDB 1.6 (Debian's ``influxd``) as a local service, plus small HTTP helpers for its v1 API."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from job.stack.errors import StackError
from job.stack.process import ManagedProcess
from job.stack.service import LocalHttpService

INFLUXD = "/usr/bin/influxd"


def influxd_binary() -> str:
    """Return the path of ``influxd`` (``/usr/bin/influxd`` or PATH).

    Raises:
        StackError: it is not installed (Debian package ``influxdb``).
    """
    if Path(INFLUXD).is_file():
        return INFLUXD
    found = shutil.which("influxd")
    if found:
        return found
    raise StackError("influxd was not found: install InfluxDB 1.x (Debian: apt-get install influxdb)")


def influx_ping(url: str, timeout: float = 2.0) -> bool:
    """Return True when ``GET <url>/ping`` answers 204 within ``timeout`` seconds."""
    import requests  # here: every ``daggers`` command imports this module, few of them speak HTTP

    try:
        return requests.get(f"{url}/ping", timeout=timeout).status_code == 204
    except requests.RequestException:
        return False


def influx_query(
    url: str, q: str, db: str | None = None, *, method: str = "GET", timeout: float = 30.0
) -> dict[str, Any]:
    """Run InfluxQL ``q`` (against database ``db``) through ``/query`` and return the parsed JSON.

    Raises:
        StackError: HTTP failure, or the server reports an error for a statement.
    """
    import requests

    params = {"q": q, **({"db": db} if db else {})}
    try:
        resp = requests.request(method, f"{url}/query", params=params, timeout=timeout)
    except requests.RequestException as exc:
        raise StackError(f"InfluxDB at {url} cannot be reached: {exc}") from exc
    try:
        body: dict[str, Any] = resp.json()
    except ValueError:
        body = {}
    reported = [body.get("error")] + [r.get("error") for r in body.get("results", [])]
    errors = [str(e) for e in reported if e]
    if resp.status_code >= 400 or errors:
        detail = "; ".join(errors) or resp.text.strip() or f"HTTP {resp.status_code}"
        raise StackError(f"InfluxDB query {q!r} failed: {detail}")
    return body


def create_database(url: str, name: str) -> None:
    """Create InfluxDB database ``name`` (``POST /query CREATE DATABASE``; a no-op if it exists).

    Raises:
        StackError: the server cannot be reached or refuses.
    """
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    influx_query(url, f'CREATE DATABASE "{quoted}"', method="POST")


class InfluxServer(LocalHttpService):
    """``influxd run -config /dev/null`` on ``127.0.0.1:port`` with its directories under ``root``.

    ``root`` holds ``meta/``, ``data/``, ``wal/``, ``influxd.log`` and ``influxd.pid``.
    ``bind_port`` is the backup/RPC port (``INFLUXDB_BIND_ADDRESS``).
    """

    folders = ("meta", "data", "wal")

    def __init__(self, root: Path, port: int, bind_port: int) -> None:
        self.root = Path(root)
        self.port = port
        self.bind_port = bind_port
        self.process = ManagedProcess(
            "InfluxDB",
            [influxd_binary(), "run", "-config", "/dev/null"],
            log_path=self.root / "influxd.log",
            pid_path=self.root / "influxd.pid",
            env=self.env(),
        )

    def env(self) -> dict[str, str]:
        """Return the environment that configures influxd (it reads no config file)."""
        return {
            "INFLUXDB_HTTP_BIND_ADDRESS": f"127.0.0.1:{self.port}",
            "INFLUXDB_BIND_ADDRESS": f"127.0.0.1:{self.bind_port}",
            "INFLUXDB_META_DIR": str(self.root / "meta"),
            "INFLUXDB_DATA_DIR": str(self.root / "data"),
            "INFLUXDB_DATA_WAL_DIR": str(self.root / "wal"),
            "INFLUXDB_REPORTING_DISABLED": "true",
            "INFLUXDB_MONITOR_STORE_ENABLED": "false",  # no _internal database written every 10 s
            "INFLUXDB_HTTP_LOG_ENABLED": "false",
            "INFLUXDB_DATA_QUERY_LOG_ENABLED": "false",
        }

    def healthy(self, timeout: float = 2.0) -> bool:
        """Return True when ``/ping`` answers 204."""
        return influx_ping(self.url, timeout)

    def create_database(self, name: str) -> None:
        """Create database ``name`` (idempotent)."""
        create_database(self.url, name)
