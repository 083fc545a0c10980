"""The dagger of a chaos run as the runner sees it, however it runs: what it can do to it
(:class:`DaggerHandle`) and what it reads of it each second (:class:`Observation`).

:class:`ProcessDagger` is a bare ``python -m job.cli run`` process; the control-plane one is
:class:`job.chaos.world.ControlledDagger`.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from job.chaos.faults import signal_group
from job.query.liveness import read_json


@dataclass(frozen=True)
class Observation:
    """The dagger at one moment: its progress (the runner's ``status.json``) and where it runs."""

    progress: dict[str, Any] = field(default_factory=dict)
    alive: bool = False
    pid: int | None = None
    cluster: str | None = None  # None: not under the control plane
    state: str | None = None  # the control plane's actual_state


def read_status(checkpoint: Path | str | None) -> dict[str, Any]:
    """Return the runner's ``<checkpoint>/status.json`` ({} when missing or partial)."""
    if not checkpoint:
        return {}
    return read_json(Path(checkpoint) / "status.json") or {}


class DaggerHandle(Protocol):
    """What a chaos run does to its dagger."""

    #: True when something else (a controller) restarts the dagger after a crash.
    supervised: bool

    @property
    def starts(self) -> int:
        """How many dagger processes ran (that the run saw)."""
        ...

    def start(self) -> None:
        """Run the dagger (again)."""

    def send(self, sig: int) -> None:
        """Send ``sig`` to the dagger's process group (nothing when it does not run)."""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        """Stop the dagger with ``sig`` and wait until it is gone."""

    def alive(self) -> bool:
        """Whether the dagger's process runs."""
        ...

    def pid(self) -> int | None:
        """The dagger's process (and process group) id, None when it does not run."""
        ...

    def observe(self) -> Observation:
        """The dagger now."""
        ...


class ProcessDagger:
    """The dagger as a bare process (``python -m job.cli run``), restartable by the run itself."""

    supervised = False

    def __init__(self, spec_path: Path, state_dir: Path, checkpoint: Path, log: Path) -> None:
        self.spec_path, self.state_dir, self.checkpoint, self.log = spec_path, state_dir, checkpoint, log
        self.proc: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def starts(self) -> int:
        return self._starts

    def start(self) -> None:
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "job.cli",
                    "run",
                    str(self.spec_path),
                    "--state-dir",
                    str(self.state_dir),
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=Path(__file__).resolve().parents[2],
            )
        self._starts += 1

    def send(self, sig: int) -> None:
        if self.alive():
            signal_group(self.pid(), sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        if self.proc is None:
            return
        self.send(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.send(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pid(self) -> int | None:
        return self.proc.pid if self.alive() and self.proc is not None else None

    def observe(self) -> Observation:
        alive = self.alive()
        return Observation(progress=read_status(self.checkpoint), alive=alive, pid=self.pid())
