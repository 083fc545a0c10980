"""The controller's Prometheus metrics: the health model's verdicts and each dagger's figures at ``/metrics``.

The controller hands every round's verdicts to :class:`HealthMetrics` (:meth:`HealthMetrics.update`); a
scrape reads the newest ones. A figure a dagger shows none of (stopped, failed, crash-looping, unknown)
has no sample, so a dashboard never draws an old value as live.

Labels: ``cluster``, ``team``, ``dagger`` (per dagger), ``state`` (one series per state, 1 for the
current one), ``part`` (controller, spark, kafka, influx).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import start_http_server

from job.control.health_model import CLUSTER_STATES, DAGGER_STATES, ClusterHealth, DaggerHealth, is_live

#: Every metric the controller serves, by name (as a query names it; counters add ``_total``).
METRICS: dict[str, str] = {
    "daggers_dagger_state": "1 for the dagger's state of the health model, 0 for the others.",
    "daggers_dagger_rows_per_second": "Rows read per second of wall time over the last minute of micro-batches "
    "(its age is the last batch's while its brokers do not answer).",
    "daggers_dagger_lag_records": "Records on the dagger's topics its last committed batch has not read.",
    "daggers_dagger_lag_unknown": "1 when a live dagger's brokers answered with end offsets behind its position "
    "(records lost or a wrong answer): its lag is unknown, and has no sample.",
    "daggers_dagger_batch_seconds": "Duration of the last micro-batch.",
    "daggers_dagger_figure_age_seconds": "Age of each figure (label figure: rows_per_second, lag, batch).",
    "daggers_dagger_restarts": "Crashes in a row the controller restarted the dagger after.",
    "daggers_dagger_next_retry_timestamp_seconds": "When a crashed dagger is restarted next (epoch seconds).",
    "daggers_dagger_watermark_age_seconds": "How far the dagger's event-time watermark is behind now.",
    "daggers_dagger_sink_errors_total": "Sink writes that failed after their retries, since the checkpoint began.",
    "daggers_dagger_late_rows_dropped_total": "Records dropped as later than the watermark, since the checkpoint "
    "began (bound=upper: a fused dagger's stream's, before its WHERE; at most that many were its own).",
    "daggers_cluster_state": "1 for the cluster's state of the health model (healthy, degraded, unhealthy).",
    "daggers_cluster_part_up": "1 when a part of the cluster (controller, spark, kafka, influx) is ok.",
    "daggers_cluster_daggers": "The cluster's daggers in each state.",
    "daggers_controller_heartbeat_timestamp_seconds": "The controller's last round (epoch seconds).",
}


@dataclass(frozen=True)
class DaggerSeries:
    """One dagger's labels and verdict."""

    team: str
    name: str
    health: DaggerHealth


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, METRICS[name], labels=labels)


class HealthMetrics:
    """A Prometheus collector of one cluster's verdicts, updated by its controller every round."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._lock = threading.Lock()
        self._daggers: list[DaggerSeries] = []
        self._cluster: ClusterHealth | None = None
        self._beat: float | None = None

    def update(self, daggers: list[DaggerSeries], cluster: ClusterHealth, heartbeat: float) -> None:
        """Replace the verdicts a scrape returns."""
        with self._lock:
            self._daggers, self._cluster, self._beat = list(daggers), cluster, heartbeat

    def collect(self) -> Iterator[Any]:
        """Yield the metric families of the newest verdicts (prometheus_client's collector protocol)."""
        with self._lock:
            daggers, cluster, beat = self._daggers, self._cluster, self._beat
        keys = ["cluster", "team", "dagger"]
        state = _gauge("daggers_dagger_state", [*keys, "state"])
        rows, lag, batch = (
            _gauge(n, keys)
            for n in (
                "daggers_dagger_rows_per_second",
                "daggers_dagger_lag_records",
                "daggers_dagger_batch_seconds",
            )
        )
        ages = _gauge("daggers_dagger_figure_age_seconds", [*keys, "figure"])
        unknown = _gauge("daggers_dagger_lag_unknown", keys)
        restarts, retry, watermark = (
            _gauge(n, keys)
            for n in (
                "daggers_dagger_restarts",
                "daggers_dagger_next_retry_timestamp_seconds",
                "daggers_dagger_watermark_age_seconds",
            )
        )
        sink_errors = CounterMetricFamily(
            "daggers_dagger_sink_errors", METRICS["daggers_dagger_sink_errors_total"], labels=keys
        )
        late = CounterMetricFamily(
            "daggers_dagger_late_rows_dropped",
            METRICS["daggers_dagger_late_rows_dropped_total"],
            labels=[*keys, "bound"],
        )
        for d in daggers:
            h, lv = d.health, [self.cluster, d.team, d.name]
            for s in DAGGER_STATES:
                state.add_metric([*lv, s], 1.0 if h.state == s else 0.0)
            for family, figure, label, scale in (
                (rows, h.rows_per_s, "rows_per_second", 1.0),
                (lag, h.lag, "lag", 1.0),
                (batch, h.batch_ms, "batch", 0.001),
            ):
                if figure is not None:
                    family.add_metric(lv, figure.value * scale)
                    ages.add_metric([*lv, label], figure.age_s)
            if is_live(h.state):
                unknown.add_metric(lv, 1.0 if h.lag_unknown else 0.0)
            restarts.add_metric(lv, float(h.restarts))
            if h.next_retry_at is not None:
                retry.add_metric(lv, h.next_retry_at)
            if h.watermark_age_s is not None:
                watermark.add_metric(lv, h.watermark_age_s)
            if h.rows_per_s is not None:  # a live dagger's counters (none from a stopped one)
                sink_errors.add_metric(lv, float(h.sink_errors))
                late.add_metric(
                    [*lv, "upper" if h.late_rows_upper_bound else "exact"], float(h.late_rows_dropped)
                )
        yield from (state, rows, lag, unknown, batch, ages, restarts, retry, watermark, sink_errors, late)
        cstate = _gauge("daggers_cluster_state", ["cluster", "state"])
        parts = _gauge("daggers_cluster_part_up", ["cluster", "part"])
        counts = _gauge("daggers_cluster_daggers", ["cluster", "state"])
        beat_g = _gauge("daggers_controller_heartbeat_timestamp_seconds", ["cluster"])
        if cluster is not None:
            for s in CLUSTER_STATES:
                cstate.add_metric([self.cluster, s], 1.0 if cluster.state == s else 0.0)
            for part, value in cluster.parts.items():
                parts.add_metric([self.cluster, part], 1.0 if value in ("ok", "slow") else 0.0)
            for s in DAGGER_STATES:
                counts.add_metric([self.cluster, s], float(cluster.daggers.get(s, 0)))
        if beat is not None:
            beat_g.add_metric([self.cluster], beat)
        yield from (cstate, parts, counts, beat_g)


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint: its URL, and how to stop it."""

    url: str
    _server: Any

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def serve(metrics: HealthMetrics, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``metrics`` at ``http://host:port/metrics`` in a daemon thread (``port`` 0: one the OS picks).

    Raises OSError when the port cannot be bound.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(url=f"http://{host}:{server.server_port}/metrics", _server=server)
