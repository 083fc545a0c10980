"""The /metrics exposition of given verdicts (plain data in, exact samples out)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from job.control.health_model import ClusterHealth, DaggerHealth, Figure
from job.control.metrics import DaggerSeries, HealthMetrics


def samples(metrics: HealthMetrics) -> dict[str, float]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(metrics)  # type: ignore[arg-type]
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        if line and not line.startswith("#") and "_created" not in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def k(name: str, **labels: str) -> str:
    """A sample's key as the exposition writes it (labels sorted)."""
    return name + "{" + ",".join(f'{key}="{v}"' for key, v in sorted(labels.items())) + "}"


def test_states_figures_and_cluster() -> None:
    m = HealthMetrics("c1")
    live = DaggerHealth(
        "lagging",
        "lag grew",
        restarts=1,
        rows_per_s=Figure(950.0, 100.0, 2.0, True),
        lag=Figure(4000.0, 99.0, 3.0, True),
        batch_ms=Figure(1500.0, 100.0, 2.0, True),
        watermark_age_s=42.0,
        sink_errors=2,
        late_rows_dropped=7,
    )
    down = DaggerHealth("crash-looping", "crashed", next_retry_at=130.0, restarts=3)
    m.update(
        [DaggerSeries("t", "a", live), DaggerSeries("t", "b", down)],
        ClusterHealth(
            "unhealthy",
            ("1 dagger crash-looping",),
            {"controller": "ok", "spark": "ok", "kafka": "down", "influx": "unknown"},
            {"lagging": 1, "crash-looping": 1},
            1.0,
        ),
        101.0,
    )
    got = samples(m)
    a, b = {"cluster": "c1", "team": "t", "dagger": "a"}, {"cluster": "c1", "team": "t", "dagger": "b"}
    assert {k: v for k, v in got.items() if k.startswith("daggers_dagger_state") and v} == {
        k("daggers_dagger_state", **a, state="lagging"): 1.0,
        k("daggers_dagger_state", **b, state="crash-looping"): 1.0,
    }
    assert sum(1 for k in got if k.startswith("daggers_dagger_state")) == 18  # 9 states x 2 daggers
    assert {
        k: v for k, v in got.items() if not k.startswith(("daggers_dagger_state", "daggers_cluster"))
    } == {
        k("daggers_dagger_rows_per_second", **a): 950.0,
        k("daggers_dagger_lag_records", **a): 4000.0,
        k("daggers_dagger_lag_unknown", **a): 0.0,
        k("daggers_dagger_batch_seconds", **a): 1.5,
        k("daggers_dagger_figure_age_seconds", **a, figure="rows_per_second"): 2.0,
        k("daggers_dagger_figure_age_seconds", **a, figure="lag"): 3.0,
        k("daggers_dagger_figure_age_seconds", **a, figure="batch"): 2.0,
        k("daggers_dagger_restarts", **a): 1.0,
        k("daggers_dagger_restarts", **b): 3.0,
        k("daggers_dagger_next_retry_timestamp_seconds", **b): 130.0,
        k("daggers_dagger_watermark_age_seconds", **a): 42.0,
        k("daggers_dagger_sink_errors_total", **a): 2.0,
        k("daggers_dagger_late_rows_dropped_total", **a, bound="exact"): 7.0,
        'daggers_controller_heartbeat_timestamp_seconds{cluster="c1"}': 101.0,
    }
    assert {k: v for k, v in got.items() if k.startswith("daggers_cluster_state") and v} == {
        'daggers_cluster_state{cluster="c1",state="unhealthy"}': 1.0
    }
    assert {k: v for k, v in got.items() if k.startswith("daggers_cluster_part_up")} == {
        'daggers_cluster_part_up{cluster="c1",part="controller"}': 1.0,
        'daggers_cluster_part_up{cluster="c1",part="spark"}': 1.0,
        'daggers_cluster_part_up{cluster="c1",part="kafka"}': 0.0,
        'daggers_cluster_part_up{cluster="c1",part="influx"}': 0.0,
    }
    assert got['daggers_cluster_daggers{cluster="c1",state="lagging"}'] == 1.0
    assert got['daggers_cluster_daggers{cluster="c1",state="running"}'] == 0.0


def test_nothing_before_the_first_round() -> None:
    assert samples(HealthMetrics("c1")) == {}


def test_an_unknown_lag_has_no_sample_and_says_so() -> None:
    """The brokers' end offsets behind a dagger's position: no lag sample (never 0), lag_unknown 1."""
    m = HealthMetrics("c1")
    why = "the broker's end offset 120 of orders/0 is behind the dagger's position 500: records lost or a wrong answer"
    h = DaggerHealth(
        "running", f"lag unknown: {why}", rows_per_s=Figure(10.0, 100.0, 1.0, True), lag_unknown=why
    )
    m.update([DaggerSeries("t", "a", h)], ClusterHealth("healthy", (), {}, {"running": 1}, 1.0), 101.0)
    got = samples(m)
    a = {"cluster": "c1", "team": "t", "dagger": "a"}
    assert got[k("daggers_dagger_lag_unknown", **a)] == 1.0
    assert not any(key.startswith("daggers_dagger_lag_records") for key in got)
