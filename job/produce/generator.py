"""Synthetic but realistic event streams: driver GPS pings, booking logs and API gateway logs.

Everything is computed with numpy, column by column; the only per-event Python is the final
protobuf encoding (one reused message per batch, ``SerializeToString()`` per event). A batch is
deterministic for a given ``seed`` (and ``first_index``).

The model
---------
* **World** (from ``seed``, ``drivers`` and the chosen cities only, so every chunk of a long run and
  every stream share it): each driver has a home city, a vehicle (30% cars), an anchor point drawn
  from the city's Gaussian mixture (a dense centre plus hotspots on the city's biggest named places,
  GeoNames suburbs and satellite towns, :mod:`job.produce.geography`) and a smooth path around it
  (a sum of slow sinusoids, 4–12 km/h each). A driver's position, speed and status are functions of
  the absolute event time, so successive pings of a driver are near each other even across chunks,
  late or out-of-order events. Every point is folded back inside the city radius, then moved onto
  land (Natural Earth 1:10m, the Atlas's base map) when it falls at sea: towards the driver's home
  for pings, the city centre for bookings, to the first cell wholly on land.
* **Statuses** are held for 5–20 minute segments per driver: AVAILABLE 50%, ON_TRIP 40%,
  UNAVAILABLE 10%; bikes serve GO_RIDE/GO_FOOD/GO_SEND, cars GO_CAR.
* **Bookings** (one event per order): COMPLETED 55%, CANCELLED 15%, CREATED 12%, DRIVER_FOUND 10%,
  PICKED_UP 8%; BIKE 70%, CAR 30%; the driver is one of the world's drivers of the same city and
  vehicle; fares follow a log-normal trip distance, a per-km price, a minimum fare and some surge
  (0 while CREATED or CANCELLED).
* **API logs**: 12 endpoints of 8 services with their own traffic shares, log-normal latencies with
  Pareto tails (heavier for payments and routing), mostly 200 (201 for new bookings) with some
  4xx/5xx, and occasional 10-minute incidents of a service (many 5xx, slower).
* **Time**: send positions are sorted uniform times over ``[start, start + duration_s)``; event
  times add a 50 ms jitter. ``out_of_order_fraction`` of the events are displaced 1–5 s either way
  (clipped to the window) and ``late_fraction`` of them get an event time ``late_by_s`` seconds
  before their send position (which may lie before ``start``). Both counts are exactly
  ``round(fraction * count)`` and the two sets are disjoint. Times are whole microseconds.

Measured on the 2-core dev machine (Python 3.11, numpy 2.4, protobuf 7.36 upb), best of 3 runs of
``generate(stream, 200_000, ..., late_fraction=0.01, out_of_order_fraction=0.05)``, everything
included: driver_location ~685k events/s, booking ~580k events/s, api_log ~770k events/s; the
protobuf encoding alone runs at 1.3–1.6M messages/s (payloads of 55, 78 and 101 bytes on average).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from job.errors import DaggerError
from job.produce.cities import City, resolve_cities
from job.produce.geography import land_mask, places
from job.schema import default_registry

Stream = Literal["driver_location", "booking", "api_log"]

MESSAGE_NAMES: dict[str, str] = {
    "driver_location": "daggers.events.DriverLocationPing",
    "booking": "daggers.events.BookingLog",
    "api_log": "daggers.events.ApiLog",
}
KEY_FIELDS: dict[str, str] = {
    "driver_location": "driver_id",
    "booking": "order_number",
    "api_log": "request_id",
}
STREAMS: tuple[str, ...] = tuple(MESSAGE_NAMES)

PING_INTERVAL_S = 5.0  # a driver app pings about this often; sets the default number of drivers
JITTER_S = 0.05
OUT_OF_ORDER_S = (1.0, 5.0)
DEFAULT_LATE_BY_S = (60.0, 300.0)
KM_PER_DEG = 6371.0088 * math.pi / 180.0  # spherical Earth, as a haversine check uses
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_U64 = np.uint64


class GenerateError(DaggerError, ValueError):
    """The generator was asked for something impossible (bad count, fraction, city...)."""

    title = "Invalid event generator arguments"


@dataclass(frozen=True, eq=False)
class EventBatch:
    """Generated events in the order they are to be sent.

    ``table`` has exactly the message's fields as columns (enums as names, ``event_timestamp`` as
    ``timestamp[us, tz=UTC]``); ``payloads`` are the serialized messages and ``keys`` the Kafka keys,
    row for row. ``late`` and ``out_of_order`` are boolean masks of the events that were made late or
    displaced.
    """

    stream: str
    message_name: str
    table: pa.Table
    payloads: list[bytes]
    keys: list[bytes]
    late: np.ndarray = field(repr=False)
    out_of_order: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.payloads)

    def timestamps_ms(self) -> list[int]:
        """Return each event's time in epoch milliseconds (floor), for Kafka CreateTime."""
        micros = self.table.column("event_timestamp").cast(pa.int64()).to_numpy()
        ms: list[int] = (micros // 1000).tolist()
        return ms

    def slice(self, lo: int, hi: int) -> EventBatch:
        """Return the events ``lo`` to ``hi`` (exclusive) as a batch of their own, in the same order."""
        return EventBatch(
            self.stream,
            self.message_name,
            self.table.slice(lo, max(hi - lo, 0)),
            self.payloads[lo:hi],
            self.keys[lo:hi],
            self.late[lo:hi],
            self.out_of_order[lo:hi],
        )

    def time_slices(self, seconds: float) -> list[EventBatch]:
        """Split the batch, in order, into consecutive batches of ``seconds`` of event time each.

        Slice k holds the events sent while the newest event time so far is in
        [first + k·seconds, first + (k+1)·seconds): an event sent late or out of order stays with the
        events sent around it. An empty batch gives no slice.

        Raises:
            ValueError: ``seconds`` is not positive.
        """
        if seconds <= 0:
            raise ValueError(f"a time slice must span a positive number of seconds, not {seconds}")
        if not len(self):
            return []
        micros = self.table.column("event_timestamp").cast(pa.int64()).to_numpy()
        newest = np.maximum.accumulate(micros)
        index = (newest - micros[0]) // int(seconds * 1_000_000)
        cuts = [0, *(np.flatnonzero(np.diff(index)) + 1).tolist(), len(self)]
        return [self.slice(lo, hi) for lo, hi in zip(cuts, cuts[1:], strict=False)]


# --------------------------------------------------------------------------- vectorised helpers


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = x + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    mixed: np.ndarray = x ^ (x >> _U64(31))
    return mixed


def _hash_uniform(*parts: np.ndarray | int) -> np.ndarray:
    """Return a deterministic uniform [0, 1) per element of the broadcast integer ``parts``."""
    h = np.zeros(1, dtype=_U64)
    for part in parts:
        arr = (
            np.asarray(part, dtype=np.int64).view(_U64)
            if np.ndim(part)
            else np.array([part], np.int64).view(_U64)
        )
        h = _mix64(h ^ arr)
    return (h >> _U64(11)).astype(np.float64) * 2.0**-53


def _categorical(u: np.ndarray, values: Sequence[int], shares: npt.ArrayLike) -> np.ndarray:
    """Map uniforms ``u`` to ``values`` with the given ``shares`` (normalised)."""
    cum = np.cumsum(np.asarray(shares, dtype=np.float64))
    idx = np.searchsorted(cum / cum[-1], u, side="right")
    return np.asarray(values, dtype=np.int64)[np.minimum(idx, len(values) - 1)]


def _fixed_ascii(prefix: str, numbers: np.ndarray, width: int) -> np.ndarray:
    """Return ``prefix`` + zero-padded decimal ``numbers`` as a numpy bytes ('S') array."""
    head = np.frombuffer(prefix.encode(), dtype=np.uint8)
    pow10 = 10 ** np.arange(width - 1, -1, -1, dtype=_U64)
    digits = (numbers.astype(_U64)[:, None] // pow10) % _U64(10) + _U64(48)
    buf = np.empty((len(numbers), len(head) + width), dtype=np.uint8)
    buf[:, : len(head)] = head
    buf[:, len(head) :] = digits
    return buf.view(f"S{len(head) + width}").reshape(len(numbers))


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _uuid4(rng: np.random.Generator, n: int) -> np.ndarray:
    """Return ``n`` random version-4 UUID strings as a numpy bytes ('S36') array."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 0x0F]
    out = np.full((n, 36), ord("-"), dtype=np.uint8)
    keep = np.ones(36, dtype=bool)
    keep[[8, 13, 18, 23]] = False
    out[:, keep] = hexed
    return out.view("S36").reshape(n)


def _strings(values: np.ndarray) -> pa.Array:
    """Return a numpy bytes ('S') array of ASCII text as an Arrow string array."""
    return pa.array(values, type=pa.binary()).cast(pa.string())


def _names(names: Sequence[str], codes: np.ndarray) -> pa.Array:
    """Return ``names[codes]`` as an Arrow string array (a vectorised take)."""
    return pa.array(list(names), type=pa.string()).take(pa.array(codes, type=pa.int64()))


# --------------------------------------------------------------------------- geography


@dataclass(frozen=True, eq=False)
class _Mixture:
    """Gaussian mixture components of the chosen cities: arrays of shape (cities, components)."""

    mu_e: np.ndarray
    mu_n: np.ndarray
    sigma: np.ndarray
    cum_weight: np.ndarray
    fold_km: np.ndarray  # (cities,) radius every point is folded into
    lat0: np.ndarray
    long0: np.ndarray
    city_id: np.ndarray  # (cities,) City.city_id


HOTSPOTS = 6
CENTRE_SHARE = 0.35


def _city_places(city: City) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the east, north (km from the centre) and population of the city's named places on land
    (GeoNames, :func:`job.produce.geography.places`) within 85% of its radius, the biggest
    :data:`HOTSPOTS` first, leaving out the centre itself."""
    found = [
        (
            p.population,
            (p.lng - city.long) * KM_PER_DEG * math.cos(math.radians(city.lat)),
            (p.lat - city.lat) * KM_PER_DEG,
        )
        for p in places()
        if p.on_land
    ]
    near = sorted((f for f in found if 2.0 < math.hypot(f[1], f[2]) <= 0.85 * city.radius_km), reverse=True)
    near = near[:HOTSPOTS]
    return (
        np.array([f[1] for f in near]),
        np.array([f[2] for f in near]),
        np.array([f[0] for f in near], dtype=np.float64),
    )


def _city_components(city: City) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return a city's fixed mixture (centre + hotspots): east, north, sigma (km) and weights.

    The hotspots are the city's biggest named places (suburbs and satellite towns), weighted by
    population; random places in the radius make up the number when it has fewer."""
    rng = np.random.default_rng([0xC17, city.city_id])
    r = city.radius_km
    place_e, place_n, population = _city_places(city)
    extra = HOTSPOTS - place_e.size
    angle = rng.uniform(0, 2 * math.pi, extra)
    dist = r * rng.uniform(0.15, 0.7, extra)
    mu_e = np.concatenate([[0.0], place_e, dist * np.cos(angle)])
    mu_n = np.concatenate([[0.0], place_n, dist * np.sin(angle)])
    sigma = np.concatenate([[0.18 * r], r * rng.uniform(0.03, 0.08, HOTSPOTS)])
    shares = np.concatenate(
        [
            population**0.6,
            rng.dirichlet(np.full(extra, 2.0)) * population.sum() ** 0.6 * 0.3
            if population.size
            else rng.dirichlet(np.full(extra, 2.0)),
        ]
    )
    hot = shares / shares.sum() * (1 - CENTRE_SHARE)
    return mu_e, mu_n, sigma, np.concatenate([[CENTRE_SHARE], hot])


@lru_cache(maxsize=32)
def _mixture(cities: tuple[City, ...]) -> _Mixture:
    parts = [_city_components(c) for c in cities]
    return _Mixture(
        mu_e=np.stack([p[0] for p in parts]),
        mu_n=np.stack([p[1] for p in parts]),
        sigma=np.stack([p[2] for p in parts]),
        cum_weight=np.cumsum(np.stack([p[3] for p in parts]), axis=1),
        fold_km=np.array([0.98 * c.radius_km for c in cities]),
        lat0=np.array([c.lat for c in cities]),
        long0=np.array([c.long for c in cities]),
        city_id=np.array([c.city_id for c in cities]),
    )


def _sample_points(
    rng: np.random.Generator, mix: _Mixture, city: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one point (east, north km from the centre) per element of ``city`` from its mixture."""
    u = rng.random(len(city))
    comp = np.minimum((u[:, None] >= mix.cum_weight[city]).sum(axis=1), mix.cum_weight.shape[1] - 1)
    z = rng.standard_normal((2, len(city)))
    sigma = mix.sigma[city, comp]
    return mix.mu_e[city, comp] + sigma * z[0], mix.mu_n[city, comp] + sigma * z[1]


def _fold(east: np.ndarray, north: np.ndarray, radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fold points radially into ``radius`` (a triangle wave: continuous, keeps nearby points near)."""
    r = np.hypot(east, north)
    folded = radius - np.abs(np.mod(r, 2 * radius) - radius)
    scale = np.divide(folded, r, out=np.ones_like(r), where=r > 0)
    return east * scale, north * scale


def _to_lat_long(
    mix: _Mixture, city: np.ndarray, east: np.ndarray, north: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Convert km offsets from each city's centre to latitude and longitude (degrees)."""
    lat0 = mix.lat0[city]
    lat = lat0 + north / KM_PER_DEG
    long = mix.long0[city] + east / (KM_PER_DEG * np.cos(np.radians(lat0)))
    return lat, long


def _on_land(
    mix: _Mixture,
    city: np.ndarray,
    east: np.ndarray,
    north: np.ndarray,
    anchors: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return latitude and longitude of the offsets, moved onto land (towards the city's anchor, or
    ``anchors`` per point, :meth:`job.produce.geography.LandMask.to_land`) where they fall at sea
    or on a coastal cell."""
    lat, long = _to_lat_long(mix, city, east, north)
    return land_mask().to_land(mix.city_id[city], lat, long, anchors)


# --------------------------------------------------------------------------- the driver world

DRIVER_STATUS_SHARES = {"AVAILABLE": 0.50, "ON_TRIP": 0.40, "UNAVAILABLE": 0.10}
BIKE_SERVICE_SHARES = {"GO_RIDE": 0.50, "GO_FOOD": 0.35, "GO_SEND": 0.15}
CAR_SHARE = 0.30
PATH_COMPONENTS = 3


@dataclass(frozen=True, eq=False)
class _World:
    """The drivers of one (seed, drivers, cities): identity, home, vehicle and movement parameters."""

    salt: int
    ids: np.ndarray  # 'S' driver ids
    city: np.ndarray  # index into the chosen cities
    car: np.ndarray
    anchor_e: np.ndarray
    anchor_n: np.ndarray
    home_lat: np.ndarray  # the anchor on land: where a ping at sea is moved towards
    home_long: np.ndarray
    amp: np.ndarray  # (drivers, 2, components) km
    omega: np.ndarray  # rad/s
    phase: np.ndarray
    segment_s: np.ndarray
    segment_phase_s: np.ndarray
    group_order: np.ndarray  # driver indexes sorted by (city, car)
    group_start: np.ndarray  # (cities * 2,) start of each (city, car) group in group_order
    group_count: np.ndarray


def _city_choice(rng: np.random.Generator, cities: tuple[City, ...], n: int) -> np.ndarray:
    weights = np.array([c.weight for c in cities], dtype=np.float64)
    return rng.choice(len(cities), size=n, p=weights / weights.sum())


@lru_cache(maxsize=16)
def _world(seed: int, drivers: int, cities: tuple[City, ...]) -> _World:
    rng = np.random.default_rng([seed, 0x5EED, drivers])
    city = _city_choice(rng, cities, drivers)
    car = rng.random(drivers) < CAR_SHARE
    mix = _mixture(cities)
    east, north = _fold(*_sample_points(rng, mix, city), mix.fold_km[city])
    shape = (drivers, 2, PATH_COMPONENTS)
    omega = 2 * math.pi / rng.uniform(600.0, 3600.0, shape)
    amp = rng.uniform(4.0, 12.0, shape) / 3600.0 / omega
    segment = rng.uniform(300.0, 1200.0, drivers)
    key = city * 2 + car
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=2 * len(cities))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    width = max(6, len(str(drivers)))
    home_lat, home_long = _on_land(mix, city, east, north)
    return _World(
        salt=int(rng.integers(0, 2**62)),
        ids=_fixed_ascii("D", np.arange(1, drivers + 1), width),
        city=city,
        car=car,
        anchor_e=east,
        anchor_n=north,
        home_lat=home_lat,
        home_long=home_long,
        amp=amp,
        omega=omega,
        phase=rng.uniform(0, 2 * math.pi, shape),
        segment_s=segment,
        segment_phase_s=rng.uniform(0, 1, drivers) * segment,
        group_order=order,
        group_start=starts,
        group_count=counts,
    )


def _round_robin(rng: np.random.Generator, n: int, drivers: int) -> np.ndarray:
    """Return the driver of each of ``n`` pings: every driver once per cycle, in a shuffled order."""
    cycles = -(-n // drivers) if n else 0
    return np.argsort(rng.random((cycles, drivers)), axis=1).ravel()[:n]


def _driver_motion(
    world: _World, d: np.ndarray, t_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each ping's path position (east, north km, unfolded) and speed (km/h) at time ``t_s``."""
    arg = world.omega[d] * t_s[:, None, None] + world.phase[d]
    amp = world.amp[d]
    offset = (amp * np.sin(arg)).sum(axis=2)
    velocity = (amp * world.omega[d] * np.cos(arg)).sum(axis=2)
    speed = np.hypot(velocity[:, 0], velocity[:, 1]) * 3600.0
    return world.anchor_e[d] + offset[:, 0], world.anchor_n[d] + offset[:, 1], speed


def _segment_uniforms(world: _World, d: np.ndarray, t_s: np.ndarray, tag: int) -> np.ndarray:
    """Return a uniform per ping that is constant within the driver's current status segment."""
    segment = np.floor((t_s + world.segment_phase_s[d]) / world.segment_s[d]).astype(np.int64)
    return _hash_uniform(world.salt, tag, d.astype(np.int64), segment)


# --------------------------------------------------------------------------- time model


@dataclass(frozen=True, eq=False)
class _Times:
    micros: np.ndarray  # absolute epoch microseconds, in send order
    late: np.ndarray
    out_of_order: np.ndarray


def _event_times(
    rng: np.random.Generator,
    n: int,
    start_us: int,
    duration_us: int,
    late_fraction: float,
    late_by_s: tuple[float, float],
    out_of_order_fraction: float,
) -> _Times:
    """Return event times in send order, with the chosen events displaced or made late."""
    base = np.sort(rng.integers(0, duration_us, size=n))
    jitter = np.clip(rng.normal(0.0, JITTER_S * 1e6, n), -3e6 * JITTER_S, 3e6 * JITTER_S)
    offsets = base + np.rint(jitter).astype(np.int64)
    k_late, k_ooo = round(late_fraction * n), round(out_of_order_fraction * n)
    pick = rng.permutation(n)
    late_idx, ooo_idx = pick[:k_late], pick[k_late : k_late + k_ooo]
    shift = rng.uniform(*OUT_OF_ORDER_S, k_ooo) * rng.choice([-1.0, 1.0], k_ooo)
    offsets[ooo_idx] += np.rint(shift * 1e6).astype(np.int64)
    offsets = np.clip(offsets, 0, duration_us - 1)
    offsets[late_idx] = base[late_idx] - np.rint(rng.uniform(*late_by_s, k_late) * 1e6).astype(np.int64)
    late = np.zeros(n, dtype=bool)
    late[late_idx] = True
    ooo = np.zeros(n, dtype=bool)
    ooo[ooo_idx] = True
    return _Times(start_us + offsets, late, ooo)


def _timestamp_parts(micros: np.ndarray) -> tuple[list[int], list[int]]:
    """Return protobuf Timestamp (seconds, nanos) lists; nanos are whole microseconds."""
    return (micros // 1_000_000).tolist(), ((micros % 1_000_000) * 1000).tolist()


def _timestamp_array(micros: np.ndarray) -> pa.Array:
    return pa.array(micros, type=pa.timestamp("us", tz="UTC"))


# --------------------------------------------------------------------------- schema and encoding

_ARROW_KINDS: dict[str, pa.DataType] = {
    "double": pa.float64(),
    "float": pa.float32(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "enum": pa.string(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


def arrow_schema(message_name: str) -> pa.Schema:
    """Return the Arrow schema of a flat message: its fields in order, enums as strings.

    Raises:
        SchemaError: for an unknown message (from the registry).
        GenerateError: for a field kind the generator does not produce (nested, repeated).
    """
    fields = []
    for name, info in default_registry().fields(message_name).items():
        if info.repeated or info.kind not in _ARROW_KINDS:
            raise GenerateError(f"{message_name}.{name} is {info.kind}; only flat messages can be generated")
        fields.append(pa.field(name, _ARROW_KINDS[info.kind]))
    return pa.schema(fields)


@lru_cache(maxsize=16)
def _enum_values(message_name: str, field_name: str) -> tuple[pa.Array, np.ndarray]:
    """Return an enum's value names (Arrow) and numbers (numpy), in declaration order."""
    enum = default_registry().descriptor(message_name).fields_by_name[field_name].enum_type
    return pa.array([v.name for v in enum.values]), np.array([v.number for v in enum.values], dtype=np.int64)


def _enum_codes(message_name: str, field_name: str, names: pa.Array) -> list[int]:
    """Return the enum numbers of a column of enum value names (vectorised)."""
    value_names, numbers = _enum_values(message_name, field_name)
    codes: list[int] = numbers[pc.index_in(names, value_set=value_names).to_numpy()].tolist()
    return codes


def _encode(message_name: str, columns: list[list[Any]]) -> list[bytes]:
    """Serialize rows given as field-ordered column lists, the Timestamp as (seconds, nanos) lists.

    One message object is reused; a field set to its default is cleared, so the bytes equal those
    of a freshly built message.
    """
    msg = default_registry().message_class(message_name)()
    return _ENCODERS[message_name](msg, msg.event_timestamp, columns)


def encode_driver_pings(columns: list[list[Any]]) -> list[bytes]:
    """Serialize DriverLocationPing rows given as columns in field order: driver_id, lat, long, driver_status,
    service_type, the event time's seconds and nanos, accuracy_m, speed_kmh (for a benchmark's own events)."""
    return _encode(MESSAGE_NAMES["driver_location"], columns)


def _encode_ping(msg: Any, ts: Any, c: list[list[Any]]) -> list[bytes]:
    ser = msg.SerializeToString
    out: list[bytes] = []
    append = out.append
    for driver_id, lat, long, status, service, secs, nanos, acc, speed in zip(*c, strict=True):
        msg.driver_id = driver_id
        msg.lat = lat
        msg.long = long
        msg.driver_status = status
        msg.service_type = service
        ts.seconds = secs
        ts.nanos = nanos
        msg.accuracy_m = acc
        msg.speed_kmh = speed
        append(ser())
    return out


def _encode_booking(msg: Any, ts: Any, c: list[list[Any]]) -> list[bytes]:
    ser = msg.SerializeToString
    out: list[bytes] = []
    append = out.append
    for order, customer, driver, city, vehicle, status, lat, long, secs, nanos, fare in zip(*c, strict=True):
        msg.order_number = order
        msg.customer_id = customer
        msg.driver_id = driver
        msg.city_id = city
        msg.vehicle_type = vehicle
        msg.status = status
        msg.pickup_lat = lat
        msg.pickup_long = long
        ts.seconds = secs
        ts.nanos = nanos
        msg.fare_idr = fare
        append(ser())
    return out


def _encode_api_log(msg: Any, ts: Any, c: list[list[Any]]) -> list[bytes]:
    ser = msg.SerializeToString
    out: list[bytes] = []
    append = out.append
    for service, path, method, code, latency, secs, nanos, request_id in zip(*c, strict=True):
        msg.service = service
        msg.path = path
        msg.method = method
        msg.status_code = code
        msg.latency_ms = latency
        ts.seconds = secs
        ts.nanos = nanos
        msg.request_id = request_id
        append(ser())
    return out


_ENCODERS = {
    MESSAGE_NAMES["driver_location"]: _encode_ping,
    MESSAGE_NAMES["booking"]: _encode_booking,
    MESSAGE_NAMES["api_log"]: _encode_api_log,
}


def _batch(
    stream: str, columns: dict[str, pa.Array], enum_fields: Sequence[str], times: _Times, keys: list[bytes]
) -> EventBatch:
    """Assemble the table, encode the payloads (enums as numbers, timestamps split) and wrap it up."""
    message_name = MESSAGE_NAMES[stream]
    schema = arrow_schema(message_name)
    table = pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)
    lists: list[list[Any]] = []
    for f in schema:
        if f.name == "event_timestamp":
            lists.extend(_timestamp_parts(times.micros))
        elif f.name in enum_fields:
            lists.append(_enum_codes(message_name, f.name, columns[f.name]))
        else:
            lists.append(columns[f.name].to_pylist())
    payloads = _encode(message_name, lists)
    return EventBatch(stream, message_name, table, payloads, keys, times.late, times.out_of_order)


# --------------------------------------------------------------------------- streams

DRIVER_STATUSES = ("AVAILABLE", "ON_TRIP", "UNAVAILABLE")
SERVICE_TYPES = ("GO_RIDE", "GO_CAR", "GO_FOOD", "GO_SEND")


def _driver_location(
    rng: np.random.Generator, times: _Times, world: _World, cities: tuple[City, ...]
) -> EventBatch:
    n = len(times.micros)
    d = _round_robin(rng, n, len(world.ids))
    t_s = times.micros / 1e6
    east, north, speed = _driver_motion(world, d, t_s)
    accuracy = np.clip(rng.lognormal(math.log(6.0), 0.5, n), 2.0, 150.0).astype(np.float32)
    gps = rng.standard_normal((2, n)) * accuracy / 2000.0  # km, about half the reported accuracy
    mix = _mixture(cities)
    city = world.city[d]
    east, north = _fold(east + gps[0], north + gps[1], mix.fold_km[city])
    lat, long = _on_land(mix, city, east, north, (world.home_lat[d], world.home_long[d]))
    status = _categorical(_segment_uniforms(world, d, t_s, 1), range(3), list(DRIVER_STATUS_SHARES.values()))
    bike_service = _categorical(
        _segment_uniforms(world, d, t_s, 2), (0, 2, 3), list(BIKE_SERVICE_SHARES.values())
    )
    service = np.where(world.car[d], 1, bike_service)
    speed = np.maximum(speed + rng.normal(0.0, 0.5, n), 0.0).astype(np.float32)
    ids = world.ids[d]
    columns = {
        "driver_id": _strings(ids),
        "lat": pa.array(lat),
        "long": pa.array(long),
        "driver_status": _names(DRIVER_STATUSES, status),
        "service_type": _names(SERVICE_TYPES, service),
        "event_timestamp": _timestamp_array(times.micros),
        "accuracy_m": pa.array(accuracy),
        "speed_kmh": pa.array(speed),
    }
    return _batch("driver_location", columns, ("driver_status", "service_type"), times, ids.tolist())


BOOKING_STATUS_SHARES = {
    "CREATED": 0.12,
    "DRIVER_FOUND": 0.10,
    "PICKED_UP": 0.08,
    "COMPLETED": 0.55,
    "CANCELLED": 0.15,
}
BOOKING_STATUSES = tuple(BOOKING_STATUS_SHARES)
VEHICLE_TYPES = ("BIKE", "CAR")
# (median trip km, price per km, minimum fare) per vehicle type, rupiah
FARES = {"BIKE": (4.5, 2_500, 10_000), "CAR": (8.0, 4_500, 16_000)}
CANCELLED_WITH_DRIVER = 0.6
ORDER_MODULUS = 2**40  # order numbers are a bijection of the event index modulo this


def _assign_drivers(rng: np.random.Generator, world: _World, city: np.ndarray, car: np.ndarray) -> np.ndarray:
    """Pick a driver of the same city and vehicle (any vehicle if none; -1 if the city has none)."""
    key = city * 2 + car.astype(np.int64)
    start, count = world.group_start[key], world.group_count[key]
    city_start, city_count = (
        world.group_start[city * 2],
        world.group_count[city * 2] + world.group_count[city * 2 + 1],
    )
    start, count = np.where(count > 0, start, city_start), np.where(count > 0, count, city_count)
    pick = start + np.floor(rng.random(len(city)) * np.maximum(count, 1)).astype(np.int64)
    found = (
        world.group_order[np.minimum(pick, len(world.group_order) - 1)] if len(world.group_order) else pick
    )
    return np.where(count > 0, found, -1)


def _fares(rng: np.random.Generator, car: np.ndarray, status: np.ndarray) -> np.ndarray:
    """Return fares in rupiah, rounded to 500; 0 while CREATED and for CANCELLED orders."""
    median, per_km, minimum = (np.where(car, FARES["CAR"][i], FARES["BIKE"][i]) for i in range(3))
    km = np.clip(median * rng.lognormal(0.0, 0.6, len(car)), 0.5, 60.0)
    surge = np.where(rng.random(len(car)) < 0.15, rng.uniform(1.1, 2.0, len(car)), 1.0)
    fare = np.rint(np.maximum(per_km * km, minimum) * surge / 500.0).astype(np.int64) * 500
    unpriced = (status == BOOKING_STATUSES.index("CREATED")) | (status == BOOKING_STATUSES.index("CANCELLED"))
    return np.where(unpriced, 0, fare)


def _order_numbers(seed: int, first_index: int, n: int) -> np.ndarray:
    """Return unique order numbers ``RB-`` + 13 digits (an odd-multiplier bijection mod 2**40)."""
    k = (np.arange(n, dtype=np.int64) + first_index).view(_U64)
    salt = int(_mix64(np.array([seed], dtype=_U64))[0])
    numbers = (k * _U64(salt | 1) + _U64(salt >> 7)) & _U64(ORDER_MODULUS - 1)
    return _fixed_ascii("RB-", numbers, 13)


def _booking(
    rng: np.random.Generator,
    times: _Times,
    world: _World,
    cities: tuple[City, ...],
    seed: int,
    first_index: int,
) -> EventBatch:
    n = len(times.micros)
    city = _city_choice(rng, cities, n)
    car = rng.random(n) < CAR_SHARE
    status = _categorical(rng.random(n), range(5), list(BOOKING_STATUS_SHARES.values()))
    with_driver = (status != 0) & ((status != 4) | (rng.random(n) < CANCELLED_WITH_DRIVER))
    driver = np.where(with_driver, _assign_drivers(rng, world, city, car), -1)
    driver_ids = np.where(driver >= 0, world.ids[np.maximum(driver, 0)], b"")
    customers = max(1000, 50 * len(world.ids))
    customer = np.floor(customers * rng.random(n) ** 2.5).astype(np.int64) + 1  # some book far more often
    mix = _mixture(cities)
    east, north = _fold(*_sample_points(rng, mix, city), mix.fold_km[city])
    lat, long = _on_land(mix, city, east, north)
    orders = _order_numbers(seed, first_index, n)
    city_ids = np.array([c.city_id for c in cities], dtype=np.int32)[city]
    columns = {
        "order_number": _strings(orders),
        "customer_id": _strings(_fixed_ascii("C", customer, 9)),
        "driver_id": _strings(driver_ids),
        "city_id": pa.array(city_ids, type=pa.int32()),
        "vehicle_type": _names(VEHICLE_TYPES, car.astype(np.int64)),
        "status": _names(BOOKING_STATUSES, status),
        "pickup_lat": pa.array(lat),
        "pickup_long": pa.array(long),
        "event_timestamp": _timestamp_array(times.micros),
        "fare_idr": pa.array(_fares(rng, car, status), type=pa.int64()),
    }
    return _batch("booking", columns, ("vehicle_type", "status"), times, orders.tolist())


@dataclass(frozen=True)
class Endpoint:
    """One API route: its traffic share, latency shape and error rates."""

    service: str
    path: str
    method: str
    share: float
    median_ms: float
    sigma: float  # of log latency
    tail: float  # probability of a Pareto-tail request
    p4xx: float
    p5xx: float
    ok: int = 200


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("driver-location", "/v1/drivers/location", "POST", 30, 12, 0.35, 0.002, 0.004, 0.001),
    Endpoint("booking", "/v1/bookings", "POST", 6, 85, 0.45, 0.01, 0.04, 0.004, 201),
    Endpoint("booking", "/v1/bookings/{order_number}", "GET", 10, 25, 0.40, 0.005, 0.02, 0.002),
    Endpoint("booking", "/v1/bookings/{order_number}/cancel", "POST", 1, 60, 0.50, 0.01, 0.06, 0.004),
    Endpoint("pricing", "/v1/estimate", "GET", 9, 45, 0.50, 0.02, 0.01, 0.003),
    Endpoint("payment", "/v1/payments/charge", "POST", 4, 180, 0.60, 0.05, 0.03, 0.01),
    Endpoint("payment", "/v1/wallet/balance", "GET", 6, 30, 0.40, 0.005, 0.01, 0.002),
    Endpoint("maps", "/v1/routes", "GET", 8, 120, 0.70, 0.06, 0.01, 0.006),
    Endpoint("food", "/v1/restaurants", "GET", 7, 70, 0.50, 0.02, 0.005, 0.003),
    Endpoint("food", "/v1/restaurants/{restaurant_id}/menu", "GET", 6, 55, 0.50, 0.02, 0.02, 0.003),
    Endpoint("customer", "/v1/customers/me", "GET", 8, 20, 0.35, 0.003, 0.03, 0.001),
    Endpoint("auth", "/v1/auth/token", "POST", 5, 35, 0.40, 0.005, 0.06, 0.002),
)
CLIENT_ERRORS = {400: 0.30, 401: 0.15, 403: 0.05, 404: 0.30, 409: 0.05, 429: 0.15}
SERVER_ERRORS = {500: 0.45, 502: 0.20, 503: 0.25, 504: 0.10}
TIMEOUT_MS = 30_000.0
INCIDENT_BLOCK_S = 600
INCIDENT_CHANCE = 0.04  # of a service having an incident in a 10-minute block


def _endpoint_arrays() -> dict[str, np.ndarray]:
    return {
        name: np.array([getattr(e, name) for e in ENDPOINTS])
        for name in ("share", "median_ms", "sigma", "tail", "p4xx", "p5xx", "ok")
    }


def _status_codes(
    rng: np.random.Generator, ep: dict[str, np.ndarray], e: np.ndarray, incident: np.ndarray
) -> np.ndarray:
    n = len(e)
    p5xx = np.where(incident, np.minimum(ep["p5xx"][e] * 15.0, 0.5), ep["p5xx"][e])
    u = rng.random(n)
    client = _categorical(rng.random(n), list(CLIENT_ERRORS), list(CLIENT_ERRORS.values()))
    server = _categorical(rng.random(n), list(SERVER_ERRORS), list(SERVER_ERRORS.values()))
    return np.where(u < p5xx, server, np.where(u < p5xx + ep["p4xx"][e], client, ep["ok"][e]))


def _latencies(
    rng: np.random.Generator, ep: dict[str, np.ndarray], e: np.ndarray, code: np.ndarray, incident: np.ndarray
) -> np.ndarray:
    """Log-normal latencies with Pareto tails; 4xx fail fast, 5xx are slow, 504 is the timeout."""
    n = len(e)
    ms = ep["median_ms"][e] * rng.lognormal(0.0, ep["sigma"][e])
    tail = rng.random(n) < ep["tail"][e]
    ms = np.where(tail, ms * 3.0 * (1.0 + rng.pareto(1.3, n)), ms)
    ms = np.where(incident, ms * 2.5, ms)
    ms = np.where((code >= 400) & (code < 500), ms * 0.3, ms)
    ms = np.where((code >= 500) & (code != 504), ms * rng.uniform(1.0, 4.0, n), ms)
    ms = np.where(code == 504, TIMEOUT_MS + rng.uniform(0.0, 500.0, n), np.minimum(ms, TIMEOUT_MS))
    return np.round(np.maximum(ms, 0.2), 3)


def _api_log(rng: np.random.Generator, times: _Times, world_salt: int) -> EventBatch:
    n = len(times.micros)
    ep = _endpoint_arrays()
    e = _categorical(rng.random(n), range(len(ENDPOINTS)), ep["share"])
    services = sorted({x.service for x in ENDPOINTS})
    service = np.array([services.index(x.service) for x in ENDPOINTS])[e]
    block = times.micros // (INCIDENT_BLOCK_S * 1_000_000)
    incident = _hash_uniform(world_salt, 3, service, block) < INCIDENT_CHANCE
    code = _status_codes(rng, ep, e, incident)
    request_ids = _uuid4(rng, n)
    columns = {
        "service": _names([x.service for x in ENDPOINTS], e),
        "path": _names([x.path for x in ENDPOINTS], e),
        "method": _names([x.method for x in ENDPOINTS], e),
        "status_code": pa.array(code, type=pa.int32()),
        "latency_ms": pa.array(_latencies(rng, ep, e, code, incident)),
        "event_timestamp": _timestamp_array(times.micros),
        "request_id": _strings(request_ids),
    }
    return _batch("api_log", columns, (), times, request_ids.tolist())


# --------------------------------------------------------------------------- entry point


def _check(
    stream: str,
    count: int,
    seed: int,
    duration_s: float,
    late_fraction: float,
    late_by_s: tuple[float, float],
    out_of_order_fraction: float,
    drivers: int | None,
) -> None:
    """Raise GenerateError naming the first impossible argument."""
    problems = [
        (stream not in MESSAGE_NAMES, f"unknown stream {stream!r}; choose one of {', '.join(STREAMS)}"),
        (count < 0, f"count must be >= 0, not {count}"),
        (seed < 0, f"seed must be >= 0, not {seed}"),
        (not duration_s > 0 or not math.isfinite(duration_s), f"duration_s must be > 0, not {duration_s}"),
        (not 0.0 <= late_fraction <= 1.0, f"late_fraction must be within [0, 1], not {late_fraction}"),
        (
            not 0.0 <= out_of_order_fraction <= 1.0,
            f"out_of_order_fraction must be within [0, 1], not {out_of_order_fraction}",
        ),
        (late_fraction + out_of_order_fraction > 1.0, "late_fraction + out_of_order_fraction must be <= 1"),
        (
            not 0.0 <= late_by_s[0] <= late_by_s[1],
            f"late_by_s must be (low, high) with 0 <= low <= high, not {late_by_s}",
        ),
        (drivers is not None and drivers < 1, f"drivers must be >= 1, not {drivers}"),
    ]
    for bad, message in problems:
        if bad:
            raise GenerateError(message)


def epoch_micros(when: datetime) -> int:
    """Return ``when`` as whole epoch microseconds (a naive datetime is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(microseconds=1)


def default_drivers(count: int, duration_s: float) -> int:
    """Return a number of drivers that each ping about every PING_INTERVAL_S at this event rate."""
    return int(min(100_000, max(1, round(count / duration_s * PING_INTERVAL_S))))


def generate(
    stream: Stream,
    count: int,
    *,
    seed: int,
    start: datetime,
    duration_s: float,
    cities: list[str] | None = None,
    late_fraction: float = 0.0,
    late_by_s: tuple[float, float] = DEFAULT_LATE_BY_S,
    out_of_order_fraction: float = 0.0,
    drivers: int | None = None,
    first_index: int = 0,
) -> EventBatch:
    """Generate ``count`` events of ``stream`` with times in ``[start, start + duration_s)``.

    ``cities`` are names from :mod:`job.produce.cities` (all cities when None). ``drivers`` defaults
    to one per PING_INTERVAL_S of the event rate; pass it explicitly to keep the same driver world
    across chunks. ``first_index`` is the index of this batch's first event in a longer run: chunks
    of one run pass increasing values so their random draws differ and order numbers stay unique.

    Returns:
        An EventBatch in send order (see the module docstring for the model).

    Raises:
        GenerateError: for an unknown stream or city, a negative count or seed, a non-positive
            duration, or fractions outside [0, 1].
    """
    _check(stream, count, seed, duration_s, late_fraction, late_by_s, out_of_order_fraction, drivers)
    try:
        chosen = resolve_cities(cities)
    except ValueError as exc:
        raise GenerateError(str(exc)) from None
    rng = np.random.default_rng([seed, STREAMS.index(stream), first_index])
    times = _event_times(
        rng,
        count,
        epoch_micros(start),
        max(1, round(duration_s * 1e6)),
        late_fraction,
        (float(late_by_s[0]), float(late_by_s[1])),
        out_of_order_fraction,
    )
    if stream == "api_log":
        return _api_log(rng, times, int(_mix64(np.array([seed], dtype=_U64))[0] >> _U64(2)))
    world = _world(seed, drivers or default_drivers(count, duration_s), chosen)
    if stream == "driver_location":
        return _driver_location(rng, times, world, chosen)
    return _booking(rng, times, world, chosen, seed, first_index)


def generate_chunks(
    stream: Stream,
    *,
    events_per_s: float,
    total: int | None,
    seed: int,
    start: datetime,
    chunk_s: float = 1.0,
    drivers: int | None = None,
    clock: Callable[[], datetime] | None = None,
    skipped: list[float] | None = None,
    **options: Any,
) -> Iterator[EventBatch]:
    """Yield batches of consecutive ``chunk_s`` slices of event time from ``start``, lazily.

    Slice ``k`` covers ``[start + k * chunk_s, start + (k + 1) * chunk_s)`` and holds the events that
    ``events_per_s`` puts there (cumulatively rounded, so no drift); it stops after ``total`` events,
    or never when ``total`` is None. All chunks share one driver world (``drivers`` defaults to the
    rate's) and number their events on from each other (``first_index``). ``options`` go to
    :func:`generate` (cities, late_fraction, late_by_s, out_of_order_fraction).

    With ``clock`` (event times that follow the wall clock), a slice generated more than ``chunk_s`` after its
    start time begins at ``clock()`` instead and the slices after it follow on from there: a sender that falls behind its rate
    (a busy machine, a slow broker) sends events stamped when they are sent, not ever older ones, which a
    dagger whose watermark other producers moved on would drop as late. The seconds of event time so
    skipped are added up in ``skipped[0]``.

    Raises:
        GenerateError: a non-positive ``events_per_s`` or ``chunk_s``, or a bad generate() option.
    """
    if not events_per_s > 0 or not chunk_s > 0:
        raise GenerateError(f"events_per_s and chunk_s must be > 0, not {events_per_s} and {chunk_s}")
    drivers = drivers or default_drivers(max(1, round(events_per_s)), 1.0)
    k = made = 0
    shift = timedelta(0)
    while total is None or made < total:
        n = round(events_per_s * chunk_s * (k + 1)) - made
        n = n if total is None else min(n, total - made)
        if n > 0:
            begins = start + shift + timedelta(seconds=k * chunk_s)
            now = clock() if clock is not None else None
            if now is not None and now - begins > timedelta(seconds=chunk_s):
                shift += now - begins
                if skipped is not None:
                    skipped[0] += (now - begins).total_seconds()
                begins = now
            yield generate(
                stream,
                n,
                seed=seed,
                start=begins,
                duration_s=chunk_s,
                drivers=drivers,
                first_index=made,
                **options,
            )
            made += n
        k += 1


__all__ = [
    "CAR_SHARE",
    "ENDPOINTS",
    "MESSAGE_NAMES",
    "KEY_FIELDS",
    "STREAMS",
    "Endpoint",
    "EventBatch",
    "GenerateError",
    "Stream",
    "arrow_schema",
    "default_drivers",
    "epoch_micros",
    "generate",
    "generate_chunks",
]
