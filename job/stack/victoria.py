"""VictoriaMetrics (Debian's ``victoria-metrics``) as a local service."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import requests

from job.stack.errors import StackError
from job.stack.process import ManagedProcess
from job.stack.service import LocalHttpService

VICTORIA = "/usr/bin/victoria-metrics"


def victoria_binary() -> str:
    """Return the path of ``victoria-metrics``.

    Raises:
        StackError: it is not installed (Debian package ``victoria-metrics``).
    """
    if Path(VICTORIA).is_file():
        return VICTORIA
    found = shutil.which("victoria-metrics")
    if found:
        return found
    raise StackError("victoria-metrics was not found (Debian: apt-get install victoria-metrics)")


class VictoriaServer(LocalHttpService):
    """``victoria-metrics -httpListenAddr 127.0.0.1:<port> -storageDataPath <root>/data`` (and ``extra_args``,
    e.g. ``-promscrape.config=FILE``).

    ``root`` holds ``data/``, ``victoria-metrics.log`` and ``victoria-metrics.pid``.
    """

    def __init__(self, root: Path, port: int, extra_args: Sequence[str] = ()) -> None:
        self.root = Path(root)
        self.port = port
        self.process = ManagedProcess(
            "VictoriaMetrics",
            [
                victoria_binary(),
                f"-httpListenAddr=127.0.0.1:{port}",
                f"-storageDataPath={self.root / 'data'}",
                "-dedup.minScrapeInterval=1ms",  # a replayed sample overwrites, as in InfluxDB
                *extra_args,
            ],
            log_path=self.root / "victoria-metrics.log",
            pid_path=self.root / "victoria-metrics.pid",
        )

    def healthy(self, timeout: float = 2.0) -> bool:
        """Return True when ``GET /health`` answers 200."""
        try:
            return requests.get(f"{self.url}/health", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False
