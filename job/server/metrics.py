"""The platform's Prometheus metrics: the registry's view of every cluster and dagger, served by ``daggers
server --metrics-port N`` on a listener of its own, so a dashboard keeps its clusters when a controller dies.

Each controller serves its own cluster's verdicts (job/control/metrics.py); when it is killed they go with
it. The server reads the registry on each scrape (two queries: the clusters with their live daggers, then
the daggers' recent samples) and judges it by the one health model, as the API's views are judged
(job.control.views: ``judged``, ``cluster_verdict``): a dead controller's cluster reads ``unhealthy``, its
heartbeat age grows, its part ``controller`` is down and its running daggers are ``unknown``.

The listener asks for no token: keep its port on a private network, as the controllers' ones.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import and_, select
from sqlalchemy.orm import joinedload

from job.control.health_model import CLUSTER_STATES, DAGGER_STATES, ClusterHealth, HealthSettings
from job.control.metrics import MetricsServer
from job.control.models import Cluster, Dagger, now
from job.control.registry import Registry
from job.control.views import cluster_verdict, judged
from job.errors import DaggerError

_log = logging.getLogger("job.server")

#: Every metric the server serves, by name.
METRICS: dict[str, str] = {
    "daggers_platform_cluster_state": "1 for the cluster's state as the registry shows it (healthy, degraded, "
    "unhealthy), 0 for the others.",
    "daggers_platform_controller_heartbeat_age_seconds": "Seconds since the cluster's controller last wrote its "
    "heartbeat to the registry (absent when none ever did).",
    "daggers_platform_cluster_part_up": "1 when a part of the cluster (controller, spark, kafka, influx) is ok "
    "as the registry shows it.",
    "daggers_platform_cluster_daggers": "The cluster's daggers in each state, as the registry shows them.",
    "daggers_platform_dagger_state": "1 for the dagger's state as the registry shows it, 0 for the others.",
    "daggers_platform_registry_up": "1 when this scrape could read the registry.",
}


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, METRICS[name], labels=labels)


@dataclass(frozen=True)
class PlatformView:
    """The registry's view at one time: each cluster's name and verdict, and each live dagger's (cluster,
    team, name, state), by cluster name."""

    clusters: list[tuple[str, ClusterHealth]]
    daggers: list[tuple[str, str, str, str]]


class PlatformMetrics:
    """A Prometheus collector of the registry's view of every cluster and dagger, read on each scrape.

    Scrapes less than ``reuse_s`` apart (two Prometheus replicas, a burst) share one read, so the registry is
    read at most once per ``reuse_s`` however many scrape."""

    def __init__(
        self,
        registry: Registry,
        settings: HealthSettings | None = None,
        clock: Callable[[], float] = now,
        reuse_s: float = 1.0,
    ) -> None:
        self.registry = registry
        self.settings = settings or HealthSettings.from_env()
        self.clock = clock
        self.reuse_s = reuse_s
        self._lock = threading.Lock()
        self._last: tuple[float, PlatformView] | None = None

    def read(self) -> PlatformView:
        """Return the registry's view now, judged by the health model. Raises RegistryError when the registry
        cannot be read."""
        at = self.clock()
        with self.registry.session() as s:
            rows = s.execute(
                select(Cluster, Dagger)
                .select_from(Cluster)
                .outerjoin(Dagger, and_(Dagger.cluster_id == Cluster.id, Dagger.tombstone == 0))
                .options(
                    joinedload(Cluster.datacentre),
                    joinedload(Dagger.team),
                    joinedload(Dagger.status),
                    joinedload(Dagger.moving_from),
                )
                .order_by(Cluster.name, Dagger.id)
            ).all()
            clusters = list({c.id: c for c, _ in rows}.values())
            daggers = [d for _, d in rows if d is not None]
            states: dict[int, list[str]] = {c.id: [] for c in clusters}
            out: list[tuple[str, str, str, str]] = []
            for d, view in zip(daggers, judged(s, daggers, self.settings, at), strict=True):
                states[d.cluster_id].append(view.state)
                out.append((view.cluster, view.team, view.name, view.state))
            verdicts = [(c.name, cluster_verdict(c, states[c.id], self.settings, at)) for c in clusters]
        return PlatformView(verdicts, out)

    def view(self) -> PlatformView:
        """Return the view of a read less than ``reuse_s`` old, or read the registry now."""
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < self.reuse_s:
                return self._last[1]
            view = self.read()
            self._last = (time.monotonic(), view)
            return view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the metric families of the registry as it is now (prometheus_client's collector protocol)."""
        up = _gauge("daggers_platform_registry_up", [])
        try:
            view = self.view()
        except DaggerError as exc:
            _log.warning("metrics: the registry could not be read: %s", exc.message)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        cstate = _gauge("daggers_platform_cluster_state", ["cluster", "state"])
        age = _gauge("daggers_platform_controller_heartbeat_age_seconds", ["cluster"])
        parts = _gauge("daggers_platform_cluster_part_up", ["cluster", "part"])
        counts = _gauge("daggers_platform_cluster_daggers", ["cluster", "state"])
        for name, v in view.clusters:
            for state in CLUSTER_STATES:
                cstate.add_metric([name, state], 1.0 if v.state == state else 0.0)
            if v.controller_age_s is not None:
                age.add_metric([name], v.controller_age_s)
            for part, value in v.parts.items():
                parts.add_metric([name, part], 1.0 if value in ("ok", "slow") else 0.0)
            for state in DAGGER_STATES:
                counts.add_metric([name, state], float(v.daggers.get(state, 0)))
        dstate = _gauge("daggers_platform_dagger_state", ["cluster", "team", "dagger", "state"])
        for cluster, team, dagger, current in view.daggers:
            for state in DAGGER_STATES:
                dstate.add_metric([cluster, team, dagger, state], 1.0 if current == state else 0.0)
        yield from (up, cstate, age, parts, counts, dstate)


def serve(
    registry: Registry, port: int, host: str = "127.0.0.1", settings: HealthSettings | None = None
) -> MetricsServer:
    """Serve the registry's view at ``http://host:port/metrics`` in a daemon thread (``port`` 0: one the OS
    picks). Raises OSError when the port cannot be bound."""
    from prometheus_client.exposition import start_http_server

    metrics = CollectorRegistry(auto_describe=False)
    metrics.register(PlatformMetrics(registry, settings))
    server, _thread = start_http_server(port, addr=host, registry=metrics)
    shown = f"[{host}]" if ":" in host else host or "0.0.0.0"
    return MetricsServer(url=f"http://{shown}:{server.server_port}/metrics", _server=server)
