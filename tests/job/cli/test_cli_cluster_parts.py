"""``daggers cluster health`` and ``cluster list`` print a cluster's parts as the health model judges them: a
probe 3 minutes old is "stale 3m", not "ok"; a part that missed one probe is "slow", two "down"."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from typer import Typer
from typer.testing import CliRunner

from job.cli.control import register
from job.control import Registry
from job.control.models import Cluster
from tests.job.control.control_seed import seed

PROBE = {
    "ok": True,
    "spark": {
        "ok": True,
        "mode": "standalone",
        "status": "ALIVE",
        "workers_alive": 2,
        "workers": 2,
        "cores": 8,
        "cores_used": 3,
    },
    "kafka": {"ok": True, "brokers": 1, "topics": 3, "partitions": 6},
    "influx": {"ok": True},
}
TIMED_OUT = {"ok": False, "refused": False, "error": "Local: Timed out"}


def cli(url: str, *args: str) -> str:
    app = Typer()
    register(app)
    result = CliRunner().invoke(app, [*args, "--registry", url, "--user", "alice"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("probe", "age_s", "line"),
    [
        (PROBE, 180, "spark stale 3m · kafka stale 3m · influx stale 3m"),
        (
            {**PROBE, "kafka": {**TIMED_OUT, "failures": 1}},
            5,
            "spark ok 2/2 workers 3/8 cores · kafka slow · influx ok",
        ),
        (
            {**PROBE, "kafka": {**TIMED_OUT, "failures": 2}},
            5,
            "spark ok 2/2 workers 3/8 cores · kafka down · influx ok",
        ),
    ],
    ids=["stale", "slow", "down"],
)
def test_the_parts_are_printed_as_the_health_model_judges_them(
    tmp_path: Path, probe: dict[str, Any], age_s: float, line: str
) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    seed(registry)
    now = time.time()
    with registry.session() as s:
        c = s.query(Cluster).filter(Cluster.name == "a-jkt").one()
        c.health, c.health_at, c.controller_heartbeat = {**probe, "checked_at": now - age_s}, now - age_s, now
    registry.close()
    health = cli(url, "cluster", "health", "a-jkt").splitlines()
    assert health[1] == f"{line} · daggers none"
    listed = [r for r in cli(url, "cluster", "list").splitlines() if "a-jkt" in r]
    assert len(listed) == 1 and line in listed[0], listed
