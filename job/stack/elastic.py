"""noida-db's Elasticsearch REST endpoint as a local service (there is no Elasticsearch server here)."""

from __future__ import annotations

from pathlib import Path

import requests

from job.stack.broker import noida_binary
from job.stack.process import ManagedProcess


class NoidaElasticsearch:
    """``noida-db start --only elasticsearch --elasticsearch-port <port> --data-dir <root>/data``.

    ``root`` holds ``data/`` (kept across restarts), ``elasticsearch.log`` and ``elasticsearch.pid``.
    """

    def __init__(self, root: Path, port: int) -> None:
        self.root = Path(root)
        self.port = port
        self.process = ManagedProcess(
            "noida-db's Elasticsearch",
            [noida_binary(), "start", "--only", "elasticsearch", "--elasticsearch-port", str(port),
             "--data-dir", str(self.root / "data")],
            log_path=self.root / "elasticsearch.log",
            pid_path=self.root / "elasticsearch.pid",
        )

    @property
    def url(self) -> str:
        """The HTTP base URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def healthy(self, timeout: float = 2.0) -> bool:
        """Return True when ``GET /`` answers 200."""
        try:
            return requests.get(f"{self.url}/", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it answers; on failure stop it again.

        Raises:
            StackError: it exits or does not answer within ``timeout`` seconds (with the log's last lines).
        """
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self.process.start()
        try:
            self.process.wait_healthy(lambda: self.healthy(1.0), timeout)
        except BaseException:
            self.process.stop(timeout=5.0)
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and wait until it is gone."""
        self.process.stop(timeout)
