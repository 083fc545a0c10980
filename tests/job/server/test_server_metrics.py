"""``daggers server --metrics-port``: the registry's view of every cluster and dagger at /metrics, which stays
when a controller dies; the Grafana dashboard (docs/grafana/daggers-health.json) and the Prometheus alert rules
(docs/prometheus/daggers-rules.yml) against a REAL VictoriaMetrics scraping a real server and a real
controller, and a REAL vmalert evaluating the rules. The controller is SIGKILLed: the server's view turns the
cluster unhealthy, the dashboard's cluster panels keep data, ControllerDown and ControllerSilent fire."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import event, text

from job.control import ControlPlane, Registry
from job.control.metrics import METRICS as CONTROLLER_METRICS
from job.control.models import Cluster, DaggerStatus, Sample, now
from job.server.metrics import METRICS, PlatformMetrics
from job.stack.ports import free_port
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.server.server_world import running_server
from tests.services import VictoriaHandle

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[3]
DASHBOARD = ROOT / "docs" / "grafana" / "daggers-health.json"
RULES = ROOT / "docs" / "prometheus" / "daggers-rules.yml"
VMALERT = "/usr/bin/vmalert"
SILENT_S = 5  # DAGGERS_HEALTH_CONTROLLER_SILENT_S of the server and the controller
QUICK_SILENT_S = 10  # ControllerSilent's threshold in the test's copy of the rules (60 s in the shipped one)
#: The panels of the dashboard's "Clusters" row: each must have data while a controller is dead.
CLUSTER_PANELS = {
    "Cluster state",
    "Parts up",
    "Controller heartbeat age",
    "Exporters down",
    "Clusters whose controller exports nothing",
    "Daggers by state",
}
ALERTS = {
    "ControllerDown": ("critical", "1m"),
    "ControllerSilent": ("critical", "1m"),
    "ClusterUnhealthy": ("critical", "2m"),
    "DaggerFailed": ("critical", None),
    "DaggerStalled": ("critical", "2m"),
    "DaggerCrashLooping": ("critical", "5m"),
    "DaggerLagging": ("warning", "10m"),
}


# -- reading what the pieces serve ---------------------------------------------------------------


def samples(text_: str) -> dict[str, float]:
    """Return every sample of a /metrics text as ``name{k=v,...}`` (labels sorted) → value."""
    out = {}
    for family in text_string_to_metric_families(text_):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def scrape(url: str) -> dict[str, float]:
    resp = requests.get(url, timeout=30)
    resp.raise_for_status()
    return samples(resp.text)


def cluster_of(metrics: dict[str, float], cluster: str) -> dict[str, float]:
    """The cluster-level samples of ``cluster`` (state, parts, heartbeat age), without the cluster label."""
    out = {}
    for key, value in metrics.items():
        m = re.fullmatch(
            r"daggers_platform_(cluster_state|cluster_part_up|controller_heartbeat_age_seconds)"
            r"\{cluster=" + re.escape(cluster) + r"(?:,(?:part|state)=([^,}]+))?\}",
            key,
        )
        if m:
            out[f"{m[1]}:{m[2]}" if m[2] else m[1]] = value
    return out


def promql(vm: VictoriaHandle, expr: str) -> dict[str, Any]:
    """Return VictoriaMetrics' whole answer to the instant query ``expr`` (status, data or error), with the
    newest samples (``nocache``: not 30 s late, -search.latencyOffset)."""
    resp = requests.get(f"{vm.url}/api/v1/query", params={"query": expr, "nocache": "1"}, timeout=30)
    answer: dict[str, Any] = resp.json()
    return answer


def results(vm: VictoriaHandle, expr: str) -> list[dict[str, Any]]:
    answer = promql(vm, expr)
    assert answer["status"] == "success", (expr, answer)
    return list(answer["data"]["result"])


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panel_exprs(cluster: str = "a-jkt") -> dict[str, list[str]]:
    """Each panel's title → its targets' expressions, with ``$cluster`` and ``$dagger`` as a user picks them."""
    return {
        p["title"]: [t["expr"].replace("$cluster", cluster).replace("$dagger", ".*") for t in p["targets"]]
        for p in dashboard()["panels"]
        if p.get("targets")
    }


def variable_selectors(cluster: str = "a-jkt") -> dict[str, str]:
    """Each query variable → ``count by (label) (selector)``, the values Grafana's ``label_values`` lists."""
    out = {}
    for v in dashboard()["templating"]["list"]:
        if v.get("type") == "query":
            m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"])
            assert m, v["query"]
            out[v["name"]] = f"count by ({m[2]}) ({m[1].replace('$cluster', cluster)})"
    return out


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"]]


# -- the shipped files ---------------------------------------------------------------------------------


def test_the_rules_file_has_each_alert_with_its_severity_wait_and_summary() -> None:
    found = {r["alert"]: (r["labels"]["severity"], r.get("for")) for r in rules()}
    assert found == ALERTS
    assert all(r["annotations"]["summary"] and r["annotations"]["description"] for r in rules())
    exprs = {r["alert"]: r["expr"] for r in rules()}
    assert exprs["ControllerDown"] == 'up{job="daggers"} == 0'
    assert exprs["ControllerSilent"] == "daggers_platform_controller_heartbeat_age_seconds > 60"
    assert exprs["ClusterUnhealthy"] == 'daggers_platform_cluster_state{state="unhealthy"} == 1'
    check = subprocess.run([VMALERT, "-dryRun", f"-rule={RULES}"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


def test_the_dashboard_and_the_rules_query_only_metrics_that_are_served() -> None:
    exprs = [e for es in panel_exprs().values() for e in es] + list(variable_selectors().values())
    used = {m for e in exprs for m in re.findall(r"\bdaggers_platform_[a-z_]+", e)}
    assert used == set(METRICS)  # every metric of the server, and only those, has a panel
    served = set(METRICS) | set(CONTROLLER_METRICS)
    in_rules = {m for r in rules() for m in re.findall(r"\bdaggers_[a-z_]+", r["expr"])}
    assert in_rules <= served and in_rules == {
        "daggers_platform_controller_heartbeat_age_seconds",
        "daggers_platform_cluster_state",
        "daggers_platform_dagger_state",
    }


def test_every_expression_of_the_rules_and_the_dashboard_parses(
    victoria_metrics: VictoriaHandle, tmp_path: Path
) -> None:
    exprs = (
        [r["expr"] for r in rules()]
        + [e for es in panel_exprs().values() for e in es]
        + list(variable_selectors().values())
    )
    assert len(exprs) == 7 + 25 + 2  # rules, panel targets, variables
    for expr in exprs:
        answer = promql(victoria_metrics, expr)
        assert answer["status"] == "success", (expr, answer)
    assert promql(victoria_metrics, "sum by (cluster (daggers_platform_cluster_state)")["status"] == "error"
    broken = tmp_path / "broken.yml"  # and vmalert refuses a rule it cannot parse
    broken.write_text(RULES.read_text().replace('up{job="daggers"} == 0', 'up{job="daggers" == 0'))
    check = subprocess.run(
        [VMALERT, "-dryRun", f"-rule={broken}"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode != 0 and "ControllerDown" in check.stderr + check.stdout


# -- the collector in this process ----------------------------------------------------------------------


def test_a_scrape_reads_the_registry_in_two_queries(tmp_path: Path) -> None:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(reg)
        alice = ControlPlane(reg, "alice")
        for i in range(20):
            alice.create("a-jkt" if i % 2 else "a-sgp", bookings_spec(f"d{i}"), deploy=i < 10)
        at = now()
        with reg.session() as s:
            for c in s.query(Cluster).filter(Cluster.name.in_(["a-jkt", "a-sgp"])):
                c.controller_heartbeat = at - 2
                c.health = {part: {"ok": True} for part in ("spark", "kafka", "influx")}
                c.health_at = at - 3
            for status in s.query(DaggerStatus):
                if status.dagger.desired_state == "running":
                    status.actual_state, status.started_at = "running", at - 600
                    status.progress = {"updated_at": at - 1, "batch_duration_ms": 1000}
                    status.lag, status.lag_at = 0, at - 1
                    s.add_all(
                        Sample(dagger_id=status.dagger_id, at=at - 60 + k, input_rows=100 * k, lag=0)
                        for k in range(60)
                    )
        statements: list[str] = []
        event.listen(reg.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        metrics = PlatformMetrics(reg, reuse_s=60.0)
        got = samples_of(metrics)
        assert len(statements) == 2, statements
        states = {k: v for k, v in got.items() if k.startswith("daggers_platform_dagger_state") and v == 1.0}
        assert len(states) == 20
        assert sum(1 for k in states if "state=running" in k) == 10
        assert sum(1 for k in states if "state=stopped" in k) == 10
        assert cluster_of(got, "a-jkt") == {
            "cluster_state:healthy": 1.0,
            "cluster_state:degraded": 0.0,
            "cluster_state:unhealthy": 0.0,
            "controller_heartbeat_age_seconds": pytest.approx(2.0, abs=1.0),
            "cluster_part_up:controller": 1.0,
            "cluster_part_up:spark": 1.0,
            "cluster_part_up:kafka": 1.0,
            "cluster_part_up:influx": 1.0,
        }
        # b-jkt: no controller ever reported; no heartbeat age, the controller part down
        assert cluster_of(got, "b-jkt") == {
            "cluster_state:healthy": 0.0,
            "cluster_state:degraded": 0.0,
            "cluster_state:unhealthy": 1.0,
            "cluster_part_up:controller": 0.0,
            "cluster_part_up:spark": 0.0,
            "cluster_part_up:kafka": 0.0,
            "cluster_part_up:influx": 0.0,
        }
        assert got["daggers_platform_registry_up{}"] == 1.0
        samples_of(metrics)  # a second scrape within reuse_s reads nothing
        assert len(statements) == 2
    finally:
        reg.close()


def samples_of(metrics: PlatformMetrics) -> dict[str, float]:
    out = {}
    for family in metrics.collect():
        for s in family.samples:
            out[f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(s.labels.items()))}}}"] = s.value
    return out


def test_an_unreadable_registry_is_registry_up_0(tmp_path: Path) -> None:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(reg)
        assert samples_of(PlatformMetrics(reg, reuse_s=0))["daggers_platform_registry_up{}"] == 1.0
        with reg.engine.begin() as conn:
            conn.execute(text("DROP TABLE dagger_status"))
        assert samples_of(PlatformMetrics(reg, reuse_s=0)) == {"daggers_platform_registry_up{}": 0.0}
    finally:
        reg.close()


def test_a_metrics_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "DAGGERS_REGISTRY": f"sqlite:///{tmp_path / 'registry.db'}"}
        run = subprocess.run(
            [sys.executable, "-m", "job.cli", "server", "--port", "0", "--metrics-port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 2  # the command line's exit code for a refused command
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}: Address already in use" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


# -- a dead controller, end to end ----------------------------------------------------------------------


@dataclass
class Notifier:
    """An Alertmanager API (``POST /api/v2/alerts``) that keeps the names of the alerts vmalert sends."""

    url: str
    received: list[str] = field(default_factory=list)


@contextmanager
def notifier() -> Iterator[Notifier]:
    got: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.extend(a.get("labels", {}).get("alertname", "") for a in json.loads(body or b"[]"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Notifier(f"http://127.0.0.1:{server.server_address[1]}", got)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def vmalert(rule_file: Path, datasource: str, notify: str, log: Path) -> Iterator[str]:
    """Run vmalert on ``rule_file`` over ``datasource``, evaluating every 2 s; yield its URL; stop it."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                VMALERT,
                f"-rule={rule_file}",
                f"-datasource.url={datasource}",
                "-evaluationInterval=2s",
                f"-notifier.url={notify}",
                f"-httpListenAddr=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return requests.get(f"{url}/api/v1/alerts", timeout=5).ok
            except requests.RequestException:
                return False

        wait_until("vmalert to start", up, 60, every_s=0.3, proc=proc, log=log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def firing(vmalert_url: str) -> list[tuple[str, dict[str, str]]]:
    """Return vmalert's firing alerts as (name, labels)."""
    body = requests.get(f"{vmalert_url}/api/v1/alerts", timeout=10).json()
    return [(a["name"], a["labels"]) for a in body["data"]["alerts"] or [] if a["state"] == "firing"]


def quick_rules(tmp: Path) -> Path:
    """The shipped rules with every wait cut to 2 s and ControllerSilent's 60 s to QUICK_SILENT_S, so a test
    sees them fire in seconds; the expressions are otherwise the shipped ones. vmalert asks for the newest
    samples (``nocache``), not those of 30 s ago."""
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        group["params"] = {"nocache": ["1"]}
        for rule in group["rules"]:
            if rule.get("for"):
                rule["for"] = "2s"
            if rule["alert"] == "ControllerSilent":
                rule["expr"] = rule["expr"].replace("> 60", f"> {QUICK_SILENT_S}")
    out = tmp / "quick-rules.yml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@contextmanager
def controller(registry_url: str, root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``daggers controller --cluster a-jkt`` (metrics on a port the OS picks); kill its group at the end."""
    with (root / "controller.log").open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "controller",
                "--cluster",
                "a-jkt",
                "--registry",
                registry_url,
                "--state-dir",
                str(root / "state"),
                "--poll",
                "0.5",
                "--no-standby",
                "--metrics-port",
                "0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def printed_metrics_url(log: Path) -> str | None:
    m = re.search(r"Prometheus metrics \(the registry's view\) at (http://\S+/metrics)", log.read_text())
    return m[1] if m else None


def test_the_dashboard_and_the_alerts_survive_a_killed_controller(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tansu_broker: str,
    influxdb: Any,
    victoria_metrics: VictoriaHandle,
) -> None:
    monkeypatch.setenv("DAGGERS_HEALTH_CONTROLLER_SILENT_S", str(SILENT_S))  # the server's, the controller's
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    reg = Registry(url)
    seed(reg, kafka=tansu_broker, influx=influxdb.url)
    alice = ControlPlane(reg, "alice")
    alice.create("a-jkt", bookings_spec("bookings"))  # never deployed: stopped
    log = tmp_path / "server.log"
    names = ("platform-" + tmp_path.name, "controller-" + tmp_path.name)
    try:
        with (
            running_server(url, log, "--metrics-port", "0"),
            controller(url, tmp_path) as ctl,
            notifier() as alerts,
        ):
            server = str(wait_until("the metrics URL printed", lambda: printed_metrics_url(log), 30))
            ctl_url = str(
                wait_until(
                    "the controller's metrics URL in the registry",
                    lambda: alice.cluster("a-jkt").controller_metrics_url,
                    90,
                    proc=ctl,
                    log=tmp_path / "controller.log",
                )
            )
            server_addr, ctl_addr = urlparse(server).netloc, urlparse(ctl_url).netloc
            victoria_metrics.scrape(names[0], server_addr, job="daggers-platform")
            victoria_metrics.scrape(names[1], ctl_addr)

            # alive: the server reads a-jkt healthy, every part up
            def healthy() -> dict[str, float] | None:
                view = cluster_of(scrape(server), "a-jkt")
                return view if view.get("cluster_state:healthy") == 1.0 else None

            alive = wait_until(
                "a-jkt healthy in the server's view", healthy, 90, proc=ctl, log=tmp_path / "controller.log"
            )
            assert {k: v for k, v in alive.items() if k != "controller_heartbeat_age_seconds"} == {
                "cluster_state:healthy": 1.0,
                "cluster_state:degraded": 0.0,
                "cluster_state:unhealthy": 0.0,
                "cluster_part_up:controller": 1.0,
                "cluster_part_up:spark": 1.0,
                "cluster_part_up:kafka": 1.0,
                "cluster_part_up:influx": 1.0,
            }
            assert 0 <= alive["controller_heartbeat_age_seconds"] <= SILENT_S
            wait_until(
                "VictoriaMetrics to scrape the server (as job daggers-platform) and the controller",
                lambda: (
                    results(
                        victoria_metrics,
                        'daggers_platform_cluster_state{job="daggers-platform", '
                        'cluster="a-jkt", state="healthy"} == 1',
                    )
                    and results(victoria_metrics, f'up{{job="daggers", instance="{ctl_addr}"}} == 1')
                    and results(
                        victoria_metrics, 'daggers_controller_heartbeat_timestamp_seconds{cluster="a-jkt"}'
                    )
                ),
                60,
            )

            with vmalert(
                quick_rules(tmp_path), victoria_metrics.url, alerts.url, tmp_path / "vmalert.log"
            ) as va:
                # vmalert evaluates the platform's metrics: b-jkt never had a controller, it is unhealthy
                wait_until(
                    "ClusterUnhealthy for b-jkt",
                    lambda: ("ClusterUnhealthy", "b-jkt") in {(n, lb.get("cluster")) for n, lb in firing(va)},
                    60,
                    log=tmp_path / "vmalert.log",
                )
                # (not ControllerDown: on a loaded machine a 1-s scrape of a live controller may time out)
                assert ("ControllerSilent", "a-jkt") not in {(n, lb.get("cluster")) for n, lb in firing(va)}

                os.killpg(ctl.pid, signal.SIGKILL)
                ctl.wait(30)
                alice.deploy("bookings")  # asked to run while no controller watches: unknown

                def dead() -> dict[str, float] | None:
                    view = cluster_of(scrape(server), "a-jkt")
                    return view if view["cluster_part_up:controller"] == 0.0 else None

                first = wait_until("a-jkt unhealthy in the server's view", dead, 60)
                assert {k: v for k, v in first.items() if k.startswith("cluster_state")} == {
                    "cluster_state:healthy": 0.0,
                    "cluster_state:degraded": 0.0,
                    "cluster_state:unhealthy": 1.0,
                }
                assert first["controller_heartbeat_age_seconds"] > SILENT_S
                wait_until(
                    "the heartbeat age to grow",
                    lambda: (
                        cluster_of(scrape(server), "a-jkt")["controller_heartbeat_age_seconds"]
                        >= first["controller_heartbeat_age_seconds"] + 2
                    ),
                    30,
                )
                bookings = {
                    k: v
                    for k, v in scrape(server).items()
                    if k.startswith("daggers_platform_dagger_state{cluster=a-jkt,dagger=bookings,")
                }
                assert {k for k, v in bookings.items() if v == 1.0} == {
                    "daggers_platform_dagger_state{cluster=a-jkt,dagger=bookings,state=unknown,team=team-a}"
                }

                want = {("ControllerDown", ctl_addr), ("ControllerSilent", "a-jkt")}

                def fired() -> bool:
                    now_firing = {
                        (n, lb.get("instance") if n == "ControllerDown" else lb.get("cluster"))
                        for n, lb in firing(va)
                    }
                    return want <= now_firing

                wait_until(
                    "vmalert to fire ControllerDown and ControllerSilent",
                    fired,
                    90,
                    log=tmp_path / "vmalert.log",
                )
                wait_until(
                    "the notifier to receive both",
                    lambda: {"ControllerDown", "ControllerSilent"} <= set(alerts.received),
                    30,
                    log=tmp_path / "vmalert.log",
                )

            # every cluster panel of the dashboard has data while the controller is dead (polled: on a loaded
            # machine a 1-s scrape of the server may time out, and its series go stale until the next one)
            exprs = panel_exprs("a-jkt")

            empty: list[str] = []

            def every_panel() -> dict[str, list[list[dict[str, Any]]]] | None:
                found = {title: [results(victoria_metrics, e) for e in es] for title, es in exprs.items()}
                empty[:] = sorted(title for title in CLUSTER_PANELS if not any(found.get(title, [])))
                return None if empty else found

            try:
                answers = wait_until("data in every cluster panel", every_panel, 30)
            except AssertionError:
                raise AssertionError(
                    f"no data in the panels {empty}: {[exprs.get(e) for e in empty]}"
                ) from None

            def clusters(found: list[dict[str, Any]]) -> set[str | None]:
                return {r["metric"].get("cluster") for r in found}

            state, _controllers_state = answers["Cluster state"]
            assert [(r["metric"]["cluster"], r["metric"]["state"]) for r in state] == [("a-jkt", "unhealthy")]
            assert clusters(answers["Controller heartbeat age"][0]) == {"a-jkt"}
            assert float(answers["Controller heartbeat age"][0][0]["value"][1]) > SILENT_S
            assert {r["metric"]["instance"] for r in answers["Exporters down"][0]} == {ctl_addr}
            assert clusters(answers["Clusters whose controller exports nothing"][0]) == {"a-jkt"}
            assert [r["metric"] for r in answers["Clusters whose controller exports nothing"][1]] == [
                {}
            ]  # absent()
            assert {
                (r["metric"]["state"], r["value"][1])
                for r in answers["Daggers by state"][0]
                if r["value"][1] != "0"
            } == {("unknown", "1")}
            assert [(r["metric"]["dagger"], r["metric"]["state"]) for r in answers["Dagger state"][0]] == [
                ("bookings", "unknown")
            ]
            assert "a-jkt" in {
                r["metric"]["cluster"] for r in results(victoria_metrics, variable_selectors()["cluster"])
            }
            # the server serves exactly its documented metrics
            served = {f.name for f in text_string_to_metric_families(requests.get(server, timeout=30).text)}
            assert served == set(METRICS)
    finally:
        for name in names:
            victoria_metrics.unscrape(name)
        reg.close()
