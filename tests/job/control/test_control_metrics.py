"""The controller's /metrics: the health model's states and figures, scraped by a REAL VictoriaMetrics
(``-promscrape.config``) and queried with PromQL; and the Grafana dashboard queries only metrics the
controller serves. Dagger processes are tests/job/control/fake_dagger.py (real processes: one runs, one
crashes on every start, one is stopped)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests

from job.control import ControlPlane, Registry
from job.control.controller import Controller, ControllerSettings
from job.control.metrics import METRICS
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import fake
from tests.services import VictoriaHandle

DASHBOARD = Path(__file__).parents[3] / "docs" / "grafana" / "daggers-health.json"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ControlPlane, Controller]]:
    """A controller of a-jkt running in a thread: ``steady`` runs, ``loop`` crashes on every start, ``idle`` is
    created and never deployed."""
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(reg)
    alice = ControlPlane(reg, "alice")
    alice.create("a-jkt", bookings_spec("steady"), deploy=True)
    alice.create("a-jkt", bookings_spec("loop"), deploy=True)
    alice.create("a-jkt", bookings_spec("idle"))
    settings = ControllerSettings(
        poll_interval_s=0.2,
        health_interval_s=3600,
        lag_interval_s=3600,
        backoff_initial_s=600.0,
        backoff_max_s=600.0,
        max_restarts=5,
        standby=False,
        metrics_port=0,
    )
    ctl = Controller(reg, "a-jkt", tmp_path / "state", settings=settings, command=fake({"loop": "crash"}))
    stop = threading.Event()
    thread = threading.Thread(target=ctl.run_forever, args=(stop,), kwargs={"stop_daggers_on_exit": True})
    thread.start()
    try:
        yield alice, ctl
    finally:
        stop.set()
        thread.join(60)
        reg.close()


def test_victoria_metrics_scrapes_the_health_model(
    world: tuple[ControlPlane, Controller], victoria_metrics: VictoriaHandle
) -> None:
    alice, ctl = world
    url = str(
        wait_until(
            "the metrics URL in the registry", lambda: alice.cluster("a-jkt").controller_metrics_url, 60
        )
    )
    assert url == ctl.metrics_url and re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url)
    wait_until(
        "steady running and loop crash-looping",
        lambda: alice.dagger("steady").state == "running" and alice.dagger("loop").state == "crash-looping",
        60,
    )
    # its one probe (health_interval_s 3600) recorded: Spark local answers, the brokers and InfluxDB of the seed
    # (port 9) refuse the connection
    wait_until("the controller's probe", lambda: alice.cluster_health("a-jkt")["recorded"], 60)
    victoria_metrics.scrape("controller-a-jkt", str(urlparse(url).netloc), env="test")
    try:

        def query(promql: str) -> dict[str, float]:
            r = requests.get(f"{victoria_metrics.url}/api/v1/query", params={"query": promql}, timeout=10)
            r.raise_for_status()
            return {
                ",".join(
                    f"{k}={v}"
                    for k, v in sorted(x["metric"].items())
                    if k not in ("job", "instance", "env", "__name__")
                ): float(x["value"][1])
                for x in r.json()["data"]["result"]
            }

        def states() -> dict[str, float]:
            return query('daggers_dagger_state{cluster="a-jkt", env="test"} == 1')

        wait_until("a scrape", lambda: len(states()) == 3, 60)
        assert states() == {
            "cluster=a-jkt,dagger=idle,state=stopped,team=team-a": 1.0,
            "cluster=a-jkt,dagger=loop,state=crash-looping,team=team-a": 1.0,
            "cluster=a-jkt,dagger=steady,state=running,team=team-a": 1.0,
        }
        rows = query('daggers_dagger_rows_per_second{env="test"}')  # rows over wall time, not Spark's 1000
        assert list(rows) == ["cluster=a-jkt,dagger=steady,team=team-a"]
        assert 500 < rows["cluster=a-jkt,dagger=steady,team=team-a"] <= 1000  # 100 rows every 0.1 s and more
        assert query('daggers_dagger_restarts{dagger="loop"}') == {
            "cluster=a-jkt,dagger=loop,team=team-a": 1.0
        }
        retry = query("daggers_dagger_next_retry_timestamp_seconds - time()")
        assert (
            list(retry) == ["cluster=a-jkt,dagger=loop,team=team-a"]
            and 0 < retry["cluster=a-jkt,dagger=loop,team=team-a"] <= 600
        )
        assert query('sum by (state) (daggers_cluster_daggers{env="test"}) > 0') == {
            "state=crash-looping": 1.0,
            "state=running": 1.0,
            "state=stopped": 1.0,
        }
        # the parts as probed: a broker and an InfluxDB down (and a crash loop) make the cluster unhealthy
        assert query('daggers_cluster_state{env="test"} == 1') == {"cluster=a-jkt,state=unhealthy": 1.0}
        assert query('daggers_cluster_part_up{env="test"}') == {
            "cluster=a-jkt,part=controller": 1.0,
            "cluster=a-jkt,part=influx": 0.0,
            "cluster=a-jkt,part=kafka": 0.0,
            "cluster=a-jkt,part=spark": 1.0,
        }
        # the stopped dagger has no figure at all, not its last value
        assert query('daggers_dagger_batch_seconds{dagger="idle"}') == {}
    finally:
        victoria_metrics.unscrape("controller-a-jkt")


def dashboard_metrics() -> set[str]:
    """Return every ``daggers_*`` metric of a controller the dashboard's panels and variables query (the
    server's ``daggers_platform_*`` ones are tests/job/server/test_server_metrics.py's)."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dash["templating"]["list"] if v.get("type") == "query"]
    return {m for e in exprs for m in re.findall(r"\bdaggers_(?!platform_)[a-z_]+", e)}


def test_the_dashboard_queries_only_metrics_the_controller_serves(
    world: tuple[ControlPlane, Controller],
) -> None:
    alice, ctl = world
    url = str(wait_until("the metrics URL", lambda: alice.cluster("a-jkt").controller_metrics_url, 60))
    wait_until(
        "a crash-looping dagger (so every family has a sample)",
        lambda: alice.dagger("loop").state == "crash-looping" and alice.dagger("steady").state == "running",
        60,
    )

    def scraped() -> str | None:  # once steady has reported a micro-batch: every family of a live dagger
        text = requests.get(url, timeout=10).text
        return text if "\ndaggers_dagger_rows_per_second{" in text else None

    text = str(wait_until("steady's first figures in a scrape", scraped, 60))
    served = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) ", line)
        if m:
            served.add(m[1])
    assert served == set(METRICS)
    used = dashboard_metrics()
    assert used - served == set()
    assert used == served  # and every metric served has a panel
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line.startswith("daggers_")}
    # each has a sample in this world, but for the two a fake dagger without broker or event time lacks
    assert samples == served - {"daggers_dagger_lag_records", "daggers_dagger_watermark_age_seconds"}
