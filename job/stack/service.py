"""What the local HTTP services (InfluxDB, VictoriaMetrics, noida-db's Elasticsearch) have in common: a
managed process under a root folder, a base URL on 127.0.0.1, and a start that waits until it is healthy."""

from __future__ import annotations

from pathlib import Path

from job.stack.process import ManagedProcess


class LocalHttpService:
    """A service on ``127.0.0.1:<port>`` run as :attr:`process`, its files under :attr:`root`.

    Subclasses set :attr:`process` in their ``__init__``, name the folders to make in :attr:`folders` and
    say when the service answers in :meth:`healthy`.
    """

    #: Folders under ``root`` made before the process starts.
    folders: tuple[str, ...] = ("data",)
    root: Path
    port: int
    process: ManagedProcess

    @property
    def url(self) -> str:
        """The HTTP base URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def healthy(self, timeout: float = 2.0) -> bool:
        """Return True when the service answers (each subclass says how)."""
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> None:
        """Start the service and wait until it is healthy; on failure stop it again.

        Raises:
            StackError: it exits or is not healthy within ``timeout`` seconds (with the log's last lines).
        """
        for sub in self.folders:
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.process.start()
        try:
            self.process.wait_healthy(lambda: self.healthy(1.0), timeout)
        except BaseException:
            self.process.stop(timeout=5.0)
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the service and wait until it is gone."""
        self.process.stop(timeout)
