"""A dagger that crashes while its broker is frozen (SIGSTOP) says its brokers do not answer, as a stalled one
does, beside the crash's own text (which need not name the broker: here the process is killed). A real
broker (tansu, the test's own) frozen under a real controller whose lag reads time out; a real process
stands in for the dagger (fake_dagger.py) with a committed batch in its checkpoint, so the lag is read."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.health_model import CRASH_LOOPING
from job.control.models import DaggerStatus
from job.stack.broker import make_broker
from job.stack.ports import free_port
from tests.helpers import unique
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import FAKE, settings, until

pytestmark = pytest.mark.integration


def _status(registry: Registry) -> DaggerStatus:
    with registry.session() as s:
        st = s.scalars(select(DaggerStatus)).one()
        s.expunge(st)
        return st


def _committed(checkpoint: Path, topic: str) -> None:
    """One committed batch that read nothing of ``topic`` (as Spark's offset and commit logs hold it)."""
    spark = checkpoint / "spark"
    (spark / "offsets").mkdir(parents=True, exist_ok=True)
    (spark / "commits").mkdir(parents=True, exist_ok=True)
    (spark / "offsets" / "0").write_text(f'v1\n{{}}\n{{"{topic}": {{"0": 0}}}}\n')
    (spark / "commits" / "0").write_text("v1\n{}\n")


def test_a_crash_while_its_broker_is_frozen_names_the_broker(tmp_path: Path) -> None:
    broker = make_broker("tansu", tmp_path / "broker", free_port())
    frozen = False
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    topic = unique("frozen")
    seed(registry, kafka=broker.bootstrap)
    ctl = Controller(
        registry,
        "a-jkt",
        tmp_path / "state",
        settings=settings(lag_interval_s=0.5, backoff_initial_s=600.0, backoff_max_s=600.0),
        command=lambda spec, state, master: [sys.executable, str(FAKE), str(spec), "run"],
    )
    alice = ControlPlane(registry, "alice")
    try:
        broker.start()
        broker.create_topic(topic, 1)
        ctl.claim()
        alice.create("a-jkt", bookings_spec("icy", topic=topic), deploy=True)
        view = until(ctl, alice, "icy", lambda d: d.actual_state == "running" and d.checkpoint)
        _committed(Path(view.checkpoint), topic)
        until(ctl, alice, "icy", lambda d: _status(registry).lag == 0)

        assert broker.process.pid is not None
        os.kill(broker.process.pid, signal.SIGSTOP)  # up, but it answers nothing
        frozen = True
        until(ctl, alice, "icy", lambda d: _status(registry).lag_error is not None, timeout=90.0)
        pid = _status(registry).pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the dagger crashes; its own text does not name the broker
        crashed = until(ctl, alice, "icy", lambda d: d.actual_state == "crashed")
        error = _status(registry).lag_error
        assert error is not None
        assert crashed.health["state"] == CRASH_LOOPING
        assert re.fullmatch(
            rf"crashed: killed by signal 9 \(SIGKILL\); its brokers do not answer: end offsets unreadable for \d+ s: "
            rf"{re.escape(error)}; restart 1 in \d+ s",
            crashed.health["reason"],
        ), crashed.health["reason"]
    finally:
        if frozen and broker.process.pid is not None:
            os.kill(broker.process.pid, signal.SIGCONT)
        try:
            alice.stop("icy")
            until(ctl, alice, "icy", lambda d: d.actual_state in ("stopped", "failed"))
        finally:
            registry.close()
            broker.stop()
