"""A controller and a server of different ages interoperate, through a real ``daggers server``: a report with a
field the other side does not know, or without one it expects, is neither refused nor a crash.

The older side is real code: this checkout's ``job`` package as of :data:`OLD` (before the status fields
``lag_error_at`` and ``lag_unknown``), taken from the git history and run in its own process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.models import DaggerStatus, Sample
from job.control.remote import RemoteClusterAgent
from tests.job.control.control_seed import bookings_spec
from tests.job.control.test_controller import FAKE, settings, until
from tests.job.server.server_world import running_server, seed_tokens

pytestmark = pytest.mark.integration

#: The last commit whose controller and server knew neither ``lag_error_at`` nor ``lag_unknown``.
OLD = "988c3d57e6675def7d644a3a8dbaf5ddd497ad53"
ROOT = Path(__file__).resolve().parents[3]
BROKERS_SILENT = "Source error: the brokers did not answer in 5 s"


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the ``job`` package as of :data:`OLD`."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", OLD, "job"], capture_output=True, check=True, timeout=120
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:  # a shallow clone has no older version to run
        pytest.skip(f"needs the checkout's git history (commit {OLD[:7]}): {exc}")
    folder = tmp_path_factory.mktemp("old-daggers")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[tuple[str, Registry, ControlPlane, dict[str, str]]]:
    """A seeded registry (this version's schema) with one deployed dagger on a-jkt: its URL, the registry, root's
    plane and the tokens."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    reg = Registry(url)
    root, tokens = seed_tokens(reg)
    root.create("a-jkt", bookings_spec("skew"), deploy=True)
    yield url, reg, root, tokens
    reg.close()


def _status(reg: Registry) -> DaggerStatus:
    with reg.session() as s:
        st = s.scalars(select(DaggerStatus)).one()
        s.expunge(st)
        return st


def _samples(reg: Registry) -> int:
    with reg.session() as s:
        return len(s.scalars(select(Sample.id)).all())


def test_a_newer_controller_runs_against_an_older_server(
    old_code: Path,
    registry: tuple[str, Registry, ControlPlane, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This controller reports ``lag_error_at`` and ``lag_unknown``; the older server refuses a report with a
    status field it does not know ("not status fields: …", which stopped the controller). The controller
    leaves them out for that server, says so once, and its rounds are recorded: the dagger runs, and the lag
    error is there."""
    url, reg, root, tokens = registry
    with running_server(url, tmp_path / "server.log", code=old_code) as base:
        agent = RemoteClusterAgent(base, tokens["ctl-a"], "a-jkt")
        ctl = Controller(
            agent,
            "a-jkt",
            tmp_path / "state",
            settings=settings(lag_interval_s=0.2),
            command=lambda spec, state, master: [sys.executable, str(FAKE), str(spec), "run"],
        )
        answer: list[tuple[int | None, str | None, str | None]] = [(None, BROKERS_SILENT, None)]
        monkeypatch.setattr(ctl, "_lag", lambda item, checkpoint: answer[0])
        ctl.claim()
        try:
            until(ctl, root, "skew", lambda d: d.actual_state == "running")
            until(ctl, root, "skew", lambda d: _status(reg).lag_error == BROKERS_SILENT)
            assert agent.refused == {"status": {"lag_error_at"}, "sample": set(), "body": set()}
            answer[0] = (None, None, "the broker's end offset 1 of booking-log/0 is behind …")
            until(ctl, root, "skew", lambda d: _status(reg).lag_error is None)
            assert agent.refused == {
                "status": {"lag_error_at", "lag_unknown"},
                "sample": set(),
                "body": set(),
            }
            st = _status(reg)
            assert (st.lag, st.lag_error_at, st.lag_unknown) == (None, None, None)  # not known there
            until(ctl, root, "skew", lambda d: _samples(reg) > 0)  # its progress samples go through too
        finally:
            root.stop("skew")
            until(ctl, root, "skew", lambda d: d.actual_state in ("stopped", "failed"))


_OLD_CONTROLLER = """
import json, sys
from job.control.remote import RemoteClusterAgent

url, token = sys.argv[1:3]
agent = RemoteClusterAgent(url, token, "a-jkt")
agent.claim("old-host", 4242, 15.0, False)
rows = agent.assignments()
update = {"actual_state": "running", "lag": 7, "lag_at": 1.0, "lag_error": None, "progress": {"input_rows": 3}}
agent.report({rows[0]["id"]: update}, [], None, [], "old-host", 4242)
print(json.dumps(sorted(rows[0]["status"])))
"""


def test_an_older_controller_runs_against_this_server(
    old_code: Path, registry: tuple[str, Registry, ControlPlane, dict[str, str]], tmp_path: Path
) -> None:
    """An older controller (its own process, its own code) reads assignments whose status has fields it does
    not know, and reports without the ones this server has since: both work, and what it sent is recorded."""
    url, reg, _, tokens = registry
    with running_server(url, tmp_path / "server.log") as base:
        done = subprocess.run(
            [sys.executable, "-c", _OLD_CONTROLLER, base, tokens["ctl-a"]],
            cwd=old_code,
            env={**os.environ, "PYTHONPATH": str(old_code)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert {"lag_error_at", "lag_unknown"} <= set(json.loads(done.stdout))
    st = _status(reg)
    assert (st.actual_state, st.lag, st.lag_error, st.lag_error_at, st.lag_unknown) == (
        "running",
        7,
        None,
        None,
        None,
    )


def _report(base: str, token: str, body: dict[str, Any]) -> requests.Response:
    """POST a report as raw JSON (an infinity as Python's json writes it)."""
    return requests.post(
        f"{base}/api/v1/controller/a-jkt/report",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )


def test_this_server_takes_a_report_from_a_newer_controller(
    registry: tuple[str, Registry, ControlPlane, dict[str, str]], tmp_path: Path
) -> None:
    """A report with a status field, a sample field and a body field this server does not know (a newer
    controller's) is recorded without them, not refused with 422."""
    url, reg, root, tokens = registry
    dagger_id = root.dagger("skew").id
    update = {"actual_state": "running", "lag": 12, "lag_at": 5.0, "lag_skew_future": "x"}
    sample = {"dagger_id": dagger_id, "at": 5.0, "input_rows": 40, "lag": 12, "sample_future": 1}
    body = {
        "updates": {str(dagger_id): update},
        "samples": [sample],
        "host": "new-host",
        "pid": 4343,
        "body_future": {"a": 1},
    }
    with running_server(url, tmp_path / "server.log") as base:
        r = _report(base, tokens["ctl-a"], body)
        assert (r.status_code, r.json()) == (200, {"ok": True})
        # what a newer controller may send is still checked like the rest: no NaN, even in a field not known
        bad = _report(base, tokens["ctl-a"], {**body, "body_future": float("inf")})
        assert bad.status_code == 422, bad.text
    st = _status(reg)
    assert (st.actual_state, st.lag, st.lag_at) == ("running", 12, 5.0)
    with reg.session() as s:
        assert [(x.at, x.input_rows, x.lag) for x in s.scalars(select(Sample))] == [(5.0, 40, 12)]
    assert "dropped: lag_skew_future" in (tmp_path / "server.log").read_text()
