"""noida-db's Elasticsearch REST endpoint as a local service (there is no Elasticsearch server here)."""

from __future__ import annotations

from pathlib import Path

import requests

from job.stack.broker import noida_binary
from job.stack.process import ManagedProcess
from job.stack.service import LocalHttpService


class NoidaElasticsearch(LocalHttpService):
    """``noida-db start --only elasticsearch --elasticsearch-port <port> --data-dir <root>/data``.

    ``root`` holds ``data/`` (kept across restarts), ``elasticsearch.log`` and ``elasticsearch.pid``.
    """

    def __init__(self, root: Path, port: int) -> None:
        self.root = Path(root)
        self.port = port
        self.process = ManagedProcess(
            "noida-db's Elasticsearch",
            [
                noida_binary(),
                "start",
                "--only",
                "elasticsearch",
                "--elasticsearch-port",
                str(port),
                "--data-dir",
                str(self.root / "data"),
            ],
            log_path=self.root / "elasticsearch.log",
            pid_path=self.root / "elasticsearch.pid",
        )

    def healthy(self, timeout: float = 2.0) -> bool:
        """Return True when ``GET /`` answers 200."""
        try:
            return requests.get(f"{self.url}/", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False
