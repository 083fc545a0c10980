"""A case with after_read waits for the dagger's first reads (from the run's samples), and no longer than
the load plus recover_timeout_s."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from job.chaos.experiment import Case, Experiment, Load
from job.chaos.results import Sample
from job.chaos.runner import ChaosRun


def _run(tmp_path: Path, duration_s: float = 60, recover_s: float = 60) -> tuple[ChaosRun, Case, list[str]]:
    case = Case(name="hit", target="dagger", fault="kill", at_s=0, after_read=100, downtime_s=1)
    exp = Experiment(
        name="w",
        dagger="examples/bookings-per-s2.yaml",
        load=Load(stream="booking", topic="t", events_per_s=10, duration_s=duration_s),
        cases=[case],
        recover_timeout_s=recover_s,
    )
    said: list[str] = []
    run = ChaosRun(exp, tmp_path, log=said.append)
    run._t0 = time.monotonic()
    return run, case, said


def _sample(read: int) -> Sample:
    return Sample(t=0, produced=read, read=read, lag=0, input_rows_per_s=0, dagger_alive=True, watermark=None)


def test_it_waits_until_the_dagger_has_read_enough(tmp_path: Path) -> None:
    run, case, said = _run(tmp_path)
    run.samples.append(_sample(0))
    appended = threading.Event()

    def reads() -> None:
        time.sleep(0.3)
        run.samples.append(_sample(99))
        time.sleep(0.3)
        run.samples.append(_sample(100))
        appended.set()

    threading.Thread(target=reads, daemon=True).start()
    assert run._wait_for_read(case) is True
    assert appended.is_set() and run.samples[-1].read == 100
    assert said == []


def test_it_starts_anyway_after_the_load_and_recover_timeout(tmp_path: Path) -> None:
    run, case, said = _run(tmp_path, duration_s=0.2, recover_s=0.2)
    run.samples.append(_sample(7))
    assert run._wait_for_read(case) is True
    assert time.monotonic() - run._t0 >= 0.4
    assert said == ["fault hit: the dagger had read 7 of the 100 events it waits for; it starts anyway"]


def test_a_stopping_run_does_not_start_the_fault(tmp_path: Path) -> None:
    run, case, _ = _run(tmp_path)
    threading.Timer(0.2, run._stop.set).start()
    assert run._wait_for_read(case) is False


def test_after_read_is_zero_unless_given() -> None:
    assert Case(name="c", target="broker", fault="stop", at_s=1, downtime_s=1).after_read == 0
