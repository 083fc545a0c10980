"""A chaos run's results as plain data: what :mod:`job.chaos.runner` measures and :mod:`job.chaos.report`
writes (the report never imports the runner)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Sample:
    """One observation per second."""

    t: float
    produced: int
    read: int
    lag: int
    input_rows_per_s: float
    dagger_alive: bool
    watermark: str | None
    load_1m: float = 0.0
    cluster: str | None = None  # under the control plane: where the dagger is, its process and state
    pid: int | None = None
    state: str | None = None


@dataclass
class CaseResult:
    name: str
    target: str
    fault: str
    started_s: float
    ended_s: float
    recovered_s: float | None  # seconds from the end of the fault until the dagger caught up again
    # Under the control plane: the cluster the dagger was on when the fault started (the one a cluster
    # case hit), the cluster it ran on next when that is another one, and the seconds from the fault's
    # start until it ran again in a new process (None: the same process ran on, or none within the run).
    cluster: str | None = None
    moved_to: str | None = None
    running_again_s: float | None = None


@dataclass
class WindowCheck:
    window: str
    expected_points: int
    written_points: int
    matching: int


@dataclass
class Report:
    experiment: str
    description: str
    started_at: str
    duration_s: float
    events_generated: int
    events_acknowledged: int
    events_in_topic: int
    rows_read: int
    dagger_restarts: int
    cases: list[CaseResult]
    windows: list[WindowCheck]
    exact: bool
    samples: list[Sample] = field(default_factory=list)
    mode: str = "process"  # process: a bare dagger process; control-plane: under two clusters' controllers
    moves: list[dict[str, Any]] = field(default_factory=list)  # the control plane's audit of its moves

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
