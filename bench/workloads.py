"""The three benchmark workloads: their Dagger SQL, their events and their exact expected results.

* ``a`` — driver count: ``DistinctCount(driver_id)`` per level-13 S2 cell per 60 s tumbling window,
  over driver pings spread uniformly over a 254 km x 254 km square around Jakarta (about 44,000
  level-13 cells), so almost every cell is hit in every window;
* ``b`` — API health: count and p95 latency by path and status code per minute, over gateway logs
  from :func:`job.produce.generate`;
* ``c`` — pass-through: a projection of the gateway logs with a filter (the slow or failed
  requests), one InfluxDB point per kept event;
* ``d`` — API totals: count, sum, least and greatest latency by path and status code per minute, over the
  gateway logs of (b): simple aggregates only, which the source aggregates first.

Events are generated with numpy, column by column, and encoded with the project's protobuf classes;
the expected results are computed here from the same columns (numpy S2, pyarrow group-bys), so the
engine and the peers are each checked against values that none of them produced.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from job.functions import s2
from job.produce.generator import EventBatch, encode_driver_pings

JAKARTA = (-6.2088, 106.8456)
# Level-13 cells near Jakarta average ~1.47 km2 (larger than the 1.27 km2 mean over the sphere): a
# 210 km square holds ~30,000 of them, a 254 km one the ~44,000 the surge daggers saw in a city region.
SQUARE_KM = 254.0
KM_PER_DEG_LAT = 6371.0088 * math.pi / 180.0
S2_LEVEL = 13
WINDOW_S = 60
WATERMARK_DELAY_MS = 10_000
PING_INTERVAL_S = 5.0
CLOSERS = 1_000  # events after the data whose event time closes every data window
PING_CLASS = "daggers.events.DriverLocationPing"
API_CLASS = "daggers.events.ApiLog"

DRIVERS_SQL = f"""SELECT S2Id(lat, long, {S2_LEVEL}) AS tag_s2id,
       DistinctCount(driver_id) AS drivers,
       TUMBLE_END(rowtime, INTERVAL '{WINDOW_S}' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '{WINDOW_S}' SECOND), S2Id(lat, long, {S2_LEVEL})"""

API_HEALTH_SQL = f"""SELECT path AS tag_path,
       status_code AS tag_status_code,
       count(1) AS requests,
       percentile_approx(latency_ms, 0.95) AS p95_latency_ms,
       TUMBLE_END(rowtime, INTERVAL '{WINDOW_S}' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '{WINDOW_S}' SECOND), path, status_code"""

API_TOTALS_SQL = f"""SELECT path AS tag_path,
       status_code AS tag_status_code,
       COUNT(*) AS requests,
       SUM(latency_ms) AS total_latency_ms,
       MIN(latency_ms) AS min_latency_ms,
       MAX(latency_ms) AS max_latency_ms,
       TUMBLE_END(rowtime, INTERVAL '{WINDOW_S}' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '{WINDOW_S}' SECOND), path, status_code"""

SLOW_MS = 250.0
PASS_THROUGH_SQL = f"""SELECT service AS tag_service,
       path AS tag_path,
       status_code AS tag_status_code,
       latency_ms,
       request_id,
       rowtime AS window_timestamp
FROM data_stream
WHERE status_code >= 500 OR latency_ms > {SLOW_MS:g}"""

#: One point's identity (time in s or us, then tag values) mapped to its field values.
Points = dict[tuple, tuple]


@dataclass(frozen=True)
class Workload:
    """One benchmark workload: what the dagger computes and how its input and expected output are made."""

    key: str
    name: str
    title: str
    proto_class: str
    sql: str
    measurement: str
    fields: tuple[str, ...]
    tags: tuple[str, ...]
    time_epoch: str  # "s" or "u": the precision read back from InfluxDB
    windowed: bool
    default_events: int
    default_density: float  # events per second of event time in a pre-loaded run
    make: Callable[[int, int, datetime, float], EventBatch]
    expected: Callable[[pa.Table], Points]

    def measurement_for(self, runner: str) -> str:
        """Return the measurement a runner (engine, loop, sparkudf, quix) writes this workload to."""
        return f"{self.measurement}_{runner}"


# --------------------------------------------------------------------------- encoding


def _batch(
    stream: str, message_name: str, table: pa.Table, payloads: list[bytes], keys: list[bytes]
) -> EventBatch:
    n = table.num_rows
    return EventBatch(stream, message_name, table, payloads, keys, np.zeros(n, bool), np.zeros(n, bool))


def _event_micros(rng: np.random.Generator, n: int, start: datetime, density: float) -> np.ndarray:
    """Return ``n`` increasing event times (epoch us): evenly ``1/density`` s apart, jittered within a slot."""
    start_us = int(start.timestamp() * 1_000_000)
    step = 1_000_000 / density
    slots = np.arange(n, dtype=np.float64) + rng.uniform(0.0, 1.0, n)
    return start_us + np.floor(slots * step).astype(np.int64)


# --------------------------------------------------------------------------- workload a: driver pings


def square_points(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``n`` (lat, long) degree points uniform over the SQUARE_KM square centred on Jakarta."""
    half = SQUARE_KM / 2
    lat0, long0 = JAKARTA
    north = rng.uniform(-half, half, n)
    east = rng.uniform(-half, half, n)
    lat = lat0 + north / KM_PER_DEG_LAT
    long = long0 + east / (KM_PER_DEG_LAT * math.cos(math.radians(lat0)))
    return lat, long


def _driver_names(drivers: int) -> np.ndarray:
    """Return the ids ``D0000000``... of ``drivers`` drivers as a numpy object array."""
    return np.array([f"D{i:07d}" for i in range(drivers)], dtype=object)


def driver_pings(
    n: int, seed: int, start: datetime, density: float, *, first_driver: int = 0, drivers: int | None = None
) -> EventBatch:
    """Return ``n`` DriverLocationPing events from ``start``, ``density`` per second of event time.

    Drivers ping in turn (about every PING_INTERVAL_S, so ``density * 5`` drivers unless given),
    each ping at a uniform point of the square; ``first_driver`` offsets the turn (for chunks).
    """
    rng = np.random.default_rng(seed)
    micros = _event_micros(rng, n, start, density)
    drivers = drivers or max(1, int(density * PING_INTERVAL_S))
    ids = (first_driver + np.arange(n)) % drivers
    driver_id = _driver_names(drivers)[ids]
    lat, long = square_points(rng, n)
    status = rng.integers(1, 4, n)
    service = rng.integers(1, 5, n)
    accuracy = rng.uniform(2.0, 30.0, n).astype(np.float32)
    speed = rng.uniform(0.0, 60.0, n).astype(np.float32)
    secs, nanos = (micros // 1_000_000).tolist(), ((micros % 1_000_000) * 1000).tolist()
    payloads = encode_driver_pings(
        [
            driver_id.tolist(),
            lat.tolist(),
            long.tolist(),
            status.tolist(),
            service.tolist(),
            secs,
            nanos,
            accuracy.tolist(),
            speed.tolist(),
        ]
    )
    table = pa.table(
        {
            "driver_id": pa.array(driver_id.tolist(), pa.string()),
            "lat": pa.array(lat),
            "long": pa.array(long),
            "event_timestamp": pa.array(micros, pa.timestamp("us", tz="UTC")),
        }
    )
    return _batch("driver_location", PING_CLASS, table, payloads, [d.encode() for d in driver_id.tolist()])


def expected_drivers(table: pa.Table) -> Points:
    """Return (window end s, signed S2 id) -> (distinct drivers,) for every window of ``table``."""
    micros = table.column("event_timestamp").cast(pa.int64()).to_numpy()
    ids = s2.latlng_to_cell_id(table.column("lat").to_numpy(), table.column("long").to_numpy(), S2_LEVEL)
    cells = s2.to_signed(ids)
    end = (micros // 1_000_000 // WINDOW_S + 1) * WINDOW_S
    t = pa.table({"end": end, "cell": cells, "driver": table.column("driver_id")})
    g = t.group_by(["end", "cell"]).aggregate([("driver", "count_distinct")])
    return {
        (int(e), str(c)): (int(n),)
        for e, c, n in zip(
            g["end"].to_pylist(), g["cell"].to_pylist(), g["driver_count_distinct"].to_pylist(), strict=True
        )
    }


# --------------------------------------------------------------------------- workloads b and c: API logs


def api_logs(n: int, seed: int, start: datetime, density: float) -> EventBatch:
    """Return ``n`` ApiLog events from ``start`` at ``density`` per second of event time (job.produce)."""
    from job.produce import generate

    return generate("api_log", n, seed=seed, start=start, duration_s=max(n / density, 1e-3))


@dataclass(frozen=True)
class Approx:
    """An expected value known up to a range: equal to any number within [lo, hi]."""

    value: float
    lo: float
    hi: float

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Approx):
            return (self.value, self.lo, self.hi) == (other.value, other.lo, other.hi)
        return isinstance(other, int | float) and self.lo <= float(other) <= self.hi

    def __hash__(self) -> int:
        return hash((self.value, self.lo, self.hi))

    def __repr__(self) -> str:
        return f"{self.value} (any of {self.lo}..{self.hi})"


PERCENTILE_ACCURACY = 10_000  # Spark's default for percentile_approx: rank error at most n / accuracy


def _p95(values: np.ndarray) -> Approx:
    """The 95th percentile as Spark's ``percentile_approx`` defines it (the smallest value with at least
    95% of the values at or below it), with the values its rank error of ``n / 10000`` allows."""
    ordered = np.sort(values)
    n = len(ordered)
    rank = max(0, math.ceil(0.95 * n) - 1)
    slack = math.ceil(n / PERCENTILE_ACCURACY)
    return Approx(
        float(ordered[rank]), float(ordered[max(0, rank - slack)]), float(ordered[min(n - 1, rank + slack)])
    )


def _api_windows(table: pa.Table) -> pa.Table:
    """The API log's records as (window end s, path, status code, latency ms), the columns both workloads on it
    group by."""
    micros = table.column("event_timestamp").cast(pa.int64()).to_numpy()
    end = (micros // 1_000_000 // WINDOW_S + 1) * WINDOW_S
    return pa.table(
        {
            "end": end,
            "path": table.column("path"),
            "code": table.column("status_code"),
            "latency": table.column("latency_ms"),
        }
    )


def expected_api_health(table: pa.Table) -> Points:
    """Return (window end s, path, status code) -> (requests, p95 latency ms as an Approx) for every window."""
    t = _api_windows(table)
    g = t.group_by(["end", "path", "code"]).aggregate([("latency", "list")])
    out: Points = {}
    for e, p, c, lat in zip(
        g["end"].to_pylist(),
        g["path"].to_pylist(),
        g["code"].to_pylist(),
        g["latency_list"].to_pylist(),
        strict=True,
    ):
        out[(int(e), p, str(c))] = (len(lat), _p95(np.asarray(lat)))
    return out


def expected_api_totals(table: pa.Table) -> Points:
    """Return (window end s, path, status code) -> (requests, total, least and greatest latency ms) for every
    window (the total as numpy adds it: the comparison allows floats 1e-9 apart)."""
    t = _api_windows(table)
    g = t.group_by(["end", "path", "code"]).aggregate(
        [("latency", "count"), ("latency", "sum"), ("latency", "min"), ("latency", "max")]
    )
    out: Points = {}
    for e, p, c, n, total, least, most in zip(
        *(g[name].to_pylist() for name in ("end", "path", "code")),
        *(g[f"latency_{f}"].to_pylist() for f in ("count", "sum", "min", "max")),
        strict=True,
    ):
        out[(int(e), p, str(c))] = (int(n), float(total), float(least), float(most))
    return out


def expected_pass_through(table: pa.Table) -> Points:
    """Return (time us, service, path, status code) -> (latency ms,) for the kept events.

    Two kept events with the same tags and microsecond are one InfluxDB point (the later wins).
    """
    keep = pc.or_(
        pc.greater_equal(table.column("status_code"), 500), pc.greater(table.column("latency_ms"), SLOW_MS)
    )
    t = table.filter(keep)
    micros = t.column("event_timestamp").cast(pa.int64()).to_pylist()
    out: Points = {}
    for us, sv, p, c, lat in zip(
        micros,
        t["service"].to_pylist(),
        t["path"].to_pylist(),
        t["status_code"].to_pylist(),
        t["latency_ms"].to_pylist(),
        strict=True,
    ):
        out[(int(us), sv, p, str(c))] = (float(lat),)
    return out


# --------------------------------------------------------------------------- closers and the registry


def closers(workload: Workload, data_end: datetime, seed: int) -> EventBatch | None:
    """Return events after the data that move every watermark past the last data window (None for
    a pass-through, which has no windows). Their own window stays open, so nobody writes it."""
    if not workload.windowed:
        return None
    last_end = math.ceil(data_end.timestamp() / WINDOW_S) * WINDOW_S
    at = datetime.fromtimestamp(last_end + WATERMARK_DELAY_MS / 1000 + 1, UTC)
    return workload.make(CLOSERS, seed + 7919, at, 10_000.0)


def minute_floor(when: datetime) -> datetime:
    """Return ``when`` rounded down to its minute (so the first window is a whole one)."""
    return when.replace(second=0, microsecond=0)


BENCH_START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

WORKLOADS: dict[str, Workload] = {
    "a": Workload(
        "a",
        "bench-drivers-s2",
        "driver count per S2 cell (level 13, DistinctCount, 60 s)",
        PING_CLASS,
        DRIVERS_SQL,
        "drivers",
        ("drivers",),
        ("tag_s2id",),
        "s",
        True,
        1_000_000,
        4_000.0,
        driver_pings,
        expected_drivers,
    ),
    "b": Workload(
        "b",
        "bench-api-health",
        "API health (count, p95 latency by path and code, 60 s)",
        API_CLASS,
        API_HEALTH_SQL,
        "api_health",
        ("requests", "p95_latency_ms"),
        ("tag_path", "tag_status_code"),
        "s",
        True,
        1_000_000,
        10_000.0,
        api_logs,
        expected_api_health,
    ),
    "c": Workload(
        "c",
        "bench-pass-through",
        f"pass-through (5xx or latency > {SLOW_MS:g} ms)",
        API_CLASS,
        PASS_THROUGH_SQL,
        "slow_requests",
        ("latency_ms",),
        ("tag_service", "tag_path", "tag_status_code"),
        "u",
        False,
        1_000_000,
        10_000.0,
        api_logs,
        expected_pass_through,
    ),
    "d": Workload(
        "d",
        "bench-api-totals",
        "API totals (count, sum, min, max latency by path and code, 60 s)",
        API_CLASS,
        API_TOTALS_SQL,
        "api_totals",
        ("requests", "total_latency_ms", "min_latency_ms", "max_latency_ms"),
        ("tag_path", "tag_status_code"),
        "s",
        True,
        1_000_000,
        10_000.0,
        api_logs,
        expected_api_totals,
    ),
}


def data_end(start: datetime, events: int, density: float) -> datetime:
    """Return the end of the event-time span of ``events`` events at ``density`` from ``start``."""
    return start + timedelta(seconds=events / density)
