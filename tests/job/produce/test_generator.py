"""Unit tests of the synthetic event generator and of ``corrupt()`` (no broker needed)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from google.protobuf.empty_pb2 import Empty
from google.protobuf.message import DecodeError

from job.errors import DaggerError
from job.produce.cities import CITIES, city_by_name, resolve_cities
from job.produce.generator import (
    KEY_FIELDS,
    MESSAGE_NAMES,
    STREAMS,
    EventBatch,
    GenerateError,
    epoch_micros,
    generate,
    generate_chunks,
)
from job.produce.producer import ProduceError, corrupt
from job.schema import default_registry

START = datetime(2025, 3, 14, 8, 0, tzinfo=UTC)
START_US = epoch_micros(START)


def _gen(stream: str, count: int = 5_000, **kw: Any) -> EventBatch:
    kw.setdefault("seed", 7)
    kw.setdefault("start", START)
    kw.setdefault("duration_s", 600.0)
    return generate(stream, count, **kw)  # type: ignore[arg-type]


def _micros(batch: EventBatch) -> np.ndarray:
    return batch.table.column("event_timestamp").cast(pa.int64()).to_numpy()


def _haversine_km(lat1: np.ndarray, lon1: np.ndarray, lat2: float, lon2: float) -> np.ndarray:
    p1, p2 = np.radians(lat1), math.radians(lat2)
    dphi, dlmb = p2 - p1, np.radians(lon2 - lon1)
    a = np.sin(dphi / 2) ** 2 + np.cos(p1) * math.cos(p2) * np.sin(dlmb / 2) ** 2
    return 2 * 6371.0088 * np.arcsin(np.sqrt(a))


def _message_row(msg: Any) -> dict[str, Any]:
    """A parsed message as the generator's table row: enum names, timestamp as epoch micros."""
    row: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.enum_type is not None:
            value = f.enum_type.values_by_number[value].name
        elif f.message_type is not None:
            assert value.nanos % 1000 == 0, "timestamps must be whole microseconds"
            value = value.seconds * 1_000_000 + value.nanos // 1000
        row[f.name] = value
    return row


def _table_rows(batch: EventBatch) -> list[dict[str, Any]]:
    table = batch.table.set_column(
        batch.table.schema.get_field_index("event_timestamp"),
        "event_timestamp",
        batch.table.column("event_timestamp").cast(pa.int64()),
    )
    return table.to_pylist()


# ---- shape, determinism, counts ----------------------------------------------------------------


@pytest.mark.parametrize("stream", STREAMS)
def test_columns_are_the_proto_fields_in_order(stream: str) -> None:
    batch = _gen(stream, 10)
    fields = default_registry().fields(MESSAGE_NAMES[stream])
    assert batch.table.column_names == list(fields)
    assert batch.table.schema.field("event_timestamp").type == pa.timestamp("us", tz="UTC")
    for name, info in fields.items():
        if info.kind == "enum":
            assert batch.table.schema.field(name).type == pa.string()


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("count", [0, 1, 7, 2_345])
def test_exact_counts(stream: str, count: int) -> None:
    batch = _gen(stream, count, late_fraction=0.1, out_of_order_fraction=0.1)
    assert batch.table.num_rows == len(batch.payloads) == len(batch.keys) == len(batch) == count
    assert len(batch.late) == len(batch.out_of_order) == count


@pytest.mark.parametrize("stream", STREAMS)
def test_deterministic_for_a_seed(stream: str) -> None:
    kw = {"late_fraction": 0.02, "out_of_order_fraction": 0.05, "cities": ["Jakarta", "Bandung"]}
    a, b = _gen(stream, 3_000, **kw), _gen(stream, 3_000, **kw)
    assert a.table.equals(b.table)
    assert a.payloads == b.payloads and a.keys == b.keys
    assert np.array_equal(a.late, b.late)
    c = _gen(stream, 3_000, seed=8, **kw)
    assert c.payloads != a.payloads


@pytest.mark.parametrize("stream", STREAMS)
def test_keys_are_the_key_field(stream: str) -> None:
    batch = _gen(stream, 1_000)
    assert batch.keys == [k.encode() for k in batch.table.column(KEY_FIELDS[stream]).to_pylist()]


def test_order_numbers_and_request_ids_are_unique() -> None:
    assert len(set(_gen("booking", 50_000).keys)) == 50_000
    ids = _gen("api_log", 50_000).keys
    assert len(set(ids)) == 50_000
    assert all(len(i) == 36 and i[14:15] == b"4" for i in ids[:100])


# ---- protobuf agrees with Arrow -----------------------------------------------------------------


@pytest.mark.parametrize("stream", STREAMS)
def test_proto_round_trip_equals_the_table_row_for_row(stream: str) -> None:
    batch = _gen(stream, 4_000, late_fraction=0.05, out_of_order_fraction=0.05)
    cls = default_registry().message_class(MESSAGE_NAMES[stream])
    parsed = [cls.FromString(p) for p in batch.payloads]
    assert [_message_row(m) for m in parsed] == _table_rows(batch)
    # the reused-message encoder writes the same bytes as a freshly built message
    for msg, payload in zip(parsed[:200], batch.payloads[:200], strict=True):
        fresh = cls()
        fresh.CopyFrom(msg)
        assert fresh.SerializeToString() == payload


@pytest.mark.parametrize("stream", STREAMS)
def test_the_engine_decoder_reads_the_same_table(stream: str) -> None:
    arrow = pytest.importorskip("job.schema.arrow")
    batch = _gen(stream, 2_000, late_fraction=0.01)
    decoder = arrow.ArrowDecoder(default_registry(), MESSAGE_NAMES[stream], batch.table.column_names)
    decoded, failures = decoder.decode(batch.payloads)
    assert failures == []
    assert decoded.to_pylist() == batch.table.to_pylist()


@pytest.mark.parametrize("stream", STREAMS)
def test_timestamps_are_whole_microseconds_within_the_window(stream: str) -> None:
    start = datetime(2025, 3, 14, 8, 0, 0, 123457, tzinfo=UTC)  # an odd start keeps us honest
    batch = _gen(stream, 5_000, start=start, duration_s=90.5, late_fraction=0.02, out_of_order_fraction=0.1)
    micros = _micros(batch)
    cls = default_registry().message_class(MESSAGE_NAMES[stream])
    for payload, us in zip(batch.payloads, micros.tolist(), strict=True):
        ts = cls.FromString(payload).event_timestamp
        assert ts.nanos % 1000 == 0
        assert ts.seconds * 1_000_000 + ts.nanos // 1000 == us
    on_time = micros[~batch.late]
    begin = epoch_micros(start)
    assert on_time.min() >= begin and on_time.max() < begin + 90_500_000
    assert batch.timestamps_ms() == (micros // 1000).tolist()


# ---- time model ---------------------------------------------------------------------------------


def test_late_fraction_is_honoured_and_late_events_lag_their_send_position() -> None:
    n, late_by = 20_000, (30.0, 90.0)
    batch = _gen("driver_location", n, late_fraction=0.03, late_by_s=late_by, out_of_order_fraction=0.05)
    assert batch.late.sum() == round(0.03 * n)
    assert batch.out_of_order.sum() == round(0.05 * n)
    assert not (batch.late & batch.out_of_order).any()
    micros = _micros(batch)
    running_max = np.maximum.accumulate(micros)
    lag_s = np.zeros(n)
    lag_s[1:] = (running_max[:-1] - micros[1:]) / 1e6  # how far behind the newest event sent before it
    # a watermark with a delay below late_by[0] (minus jitter) drops exactly the late events
    assert np.array_equal(lag_s[1:] > 20.0, batch.late[1:])
    assert lag_s[1:][batch.late[1:]].max() <= late_by[1] + 5.5  # + an event displaced 5 s ahead, + jitter
    assert lag_s[~batch.late].max() <= 10.5  # out-of-order (<= 5 s each way) and jitter only
    # the send order is roughly the event-time order
    assert (np.diff(micros[~batch.late & ~batch.out_of_order]) >= -400_000).all()


def test_time_slices_cut_the_send_order_by_the_newest_event_time_so_far() -> None:
    batch = _gen("driver_location", 6_000, duration_s=300.0, late_fraction=0.02, out_of_order_fraction=0.05)
    parts = batch.time_slices(60.0)
    first = int(_micros(batch)[0])
    assert len(parts) == 5
    # nothing lost, nothing moved: the slices are the batch, in order
    assert [p for part in parts for p in part.payloads] == batch.payloads
    assert [k for part in parts for k in part.keys] == batch.keys
    assert np.array_equal(np.concatenate([part.late for part in parts]), batch.late)
    assert sum(part.table.num_rows for part in parts) == 6_000
    newest = first
    for k, part in enumerate(parts):
        micros = _micros(part)
        assert part.table.num_rows == len(part) == len(part.out_of_order)
        running = np.maximum.accumulate(np.maximum(micros, newest))
        # every event of slice k is sent while the newest event time is in its 60 s ...
        assert first + k * 60_000_000 <= running.min() and running.max() < first + (k + 1) * 60_000_000
        newest = int(running[-1])
    assert parts[1].late.any()  # ... a late event (older than its slice) stays where it was sent
    assert batch.slice(10, 10).payloads == [] and batch.time_slices(600.0)[0].payloads == batch.payloads
    with pytest.raises(ValueError, match="positive"):
        batch.time_slices(0)


def test_no_late_or_out_of_order_by_default() -> None:
    batch = _gen("booking", 5_000)
    assert not batch.late.any() and not batch.out_of_order.any()
    micros = _micros(batch)
    assert (np.diff(micros) >= -400_000).all()  # only the 50 ms jitter


def test_events_spread_over_the_window() -> None:
    micros = _micros(_gen("api_log", 60_000, duration_s=60.0))
    per_second = np.bincount((micros - START_US) // 1_000_000, minlength=60)
    assert len(per_second) == 60
    assert per_second.min() > 800 and per_second.max() < 1_200


# ---- geography and realism ----------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["driver_location", "booking"])
def test_all_points_are_within_their_city_radius(stream: str) -> None:
    batch = _gen(stream, 30_000, duration_s=3_600.0, late_fraction=0.05)
    lat_col, long_col = ("lat", "long") if stream == "driver_location" else ("pickup_lat", "pickup_long")
    lat, long = batch.table.column(lat_col).to_numpy(), batch.table.column(long_col).to_numpy()
    nearest = np.full(len(lat), -1)
    for i, city in enumerate(CITIES):
        inside = _haversine_km(lat, long, city.lat, city.long) <= city.radius_km
        assert not (inside & (nearest >= 0)).any(), "city circles do not overlap"
        nearest[inside] = i
    assert (nearest >= 0).all(), "every point lies inside some city's radius"
    if stream == "booking":
        ids = np.array([c.city_id for c in CITIES])[nearest]
        assert np.array_equal(ids, batch.table.column("city_id").to_numpy())


def test_cities_choose_where_events_happen() -> None:
    batch = _gen("booking", 5_000, cities=["bandung", "Bali"])
    assert set(batch.table.column("city_id").to_pylist()) == {
        city_by_name("Bandung").city_id,
        city_by_name("Denpasar").city_id,
    }
    lat = batch.table.column("pickup_lat").to_numpy()
    assert ((lat > -9.0) & (lat < -6.5)).all()


def test_points_cluster_at_the_centre_and_hotspots() -> None:
    jakarta = city_by_name("Jakarta")
    batch = _gen("booking", 20_000, cities=["Jakarta"])
    d = _haversine_km(
        batch.table.column("pickup_lat").to_numpy(),
        batch.table.column("pickup_long").to_numpy(),
        jakarta.lat,
        jakarta.long,
    )
    # far denser near the centre than a uniform disc (where 10% lie within 0.316 R), even with a
    # good part of the demand in the suburbs and satellite towns (Tangerang, Bekasi, Depok...)
    assert (d < 0.316 * jakarta.radius_km).mean() > 0.25
    hist, _, _ = np.histogram2d(
        batch.table.column("pickup_lat").to_numpy(), batch.table.column("pickup_long").to_numpy(), bins=30
    )
    assert hist.max() > 8 * hist[hist > 0].mean() / 2  # peaks (hotspots), not a flat cloud


def test_drivers_move_smoothly_and_stay_in_their_city() -> None:
    batch = _gen(
        "driver_location",
        40_000,
        duration_s=600.0,
        drivers=400,
        late_fraction=0.02,
        out_of_order_fraction=0.05,
    )
    t = batch.table.append_column("us", batch.table.column("event_timestamp").cast(pa.int64()))
    t = t.sort_by([("driver_id", "ascending"), ("us", "ascending")])
    ids = t.column("driver_id").to_numpy(zero_copy_only=False)
    lat, long, us = t.column("lat").to_numpy(), t.column("long").to_numpy(), t.column("us").to_numpy()
    same = ids[1:] == ids[:-1]
    dy = (lat[1:] - lat[:-1]) * 111.195
    dx = (long[1:] - long[:-1]) * 111.195 * np.cos(np.radians(lat[1:]))
    km = np.hypot(dx, dy)[same]
    dt_h = (us[1:] - us[:-1])[same] / 3.6e9
    assert len(set(ids)) == 400
    # successive pings of a driver are near each other: at most path speed (< 80 km/h) plus GPS noise;
    # a ping whose path leaves the land is moved to the shore on the line to the driver's home, which
    # on an indented coast (Semarang's, Singapore's islands) can slide it a little further, rarely
    fast = km > 80.0 * dt_h + 0.5
    assert fast.sum() <= 5 and (km <= 80.0 * dt_h + 3.0).all(), np.sort(km[fast])
    assert np.median(km) < 0.1
    # no driver changes city
    first_lat = {}
    for i, la in zip(ids.tolist(), lat.tolist(), strict=True):
        assert abs(first_lat.setdefault(i, la) - la) < 1.0


def test_driver_status_and_service_shares() -> None:
    t = _gen("driver_location", 100_000, duration_s=3_600.0, drivers=5_000).table
    shares = {v["values"]: v["counts"] / t.num_rows for v in pc.value_counts(t["driver_status"]).to_pylist()}
    assert shares["AVAILABLE"] == pytest.approx(0.50, abs=0.04)
    assert shares["ON_TRIP"] == pytest.approx(0.40, abs=0.04)
    assert shares["UNAVAILABLE"] == pytest.approx(0.10, abs=0.03)
    services = set(t["service_type"].to_pylist())
    assert services == {"GO_RIDE", "GO_CAR", "GO_FOOD", "GO_SEND"}
    speed, acc = t["speed_kmh"].to_numpy(), t["accuracy_m"].to_numpy()
    assert (speed >= 0).all() and 5 < np.median(speed) < 30
    assert (acc >= 2).all() and 3 < np.median(acc) < 15


def test_booking_shares_fares_and_drivers() -> None:
    t = _gen("booking", 100_000).table
    shares = {v["values"]: v["counts"] / t.num_rows for v in pc.value_counts(t["status"]).to_pylist()}
    assert shares["COMPLETED"] == pytest.approx(0.55, abs=0.02)
    assert shares["CANCELLED"] == pytest.approx(0.15, abs=0.02)
    assert set(shares) == {"CREATED", "DRIVER_FOUND", "PICKED_UP", "COMPLETED", "CANCELLED"}
    car = pc.equal(t["vehicle_type"], "CAR").to_numpy(zero_copy_only=False)
    assert car.mean() == pytest.approx(0.30, abs=0.02)
    status = t["status"].to_numpy(zero_copy_only=False)
    fare, driver = t["fare_idr"].to_numpy(), t["driver_id"].to_numpy(zero_copy_only=False)
    priced = (status != "CREATED") & (status != "CANCELLED")
    assert (fare[~priced] == 0).all()
    assert (fare[priced] >= 10_000).all() and (fare[priced] % 500 == 0).all()
    assert np.median(fare[priced & car]) > np.median(fare[priced & ~car])
    assert (driver[status == "CREATED"] == "").all()
    assert (driver[priced] != "").all()


def test_booking_drivers_are_pinging_drivers_of_the_same_city() -> None:
    kw = {"seed": 3, "drivers": 300, "duration_s": 600.0}
    pings = _gen("driver_location", 3_000, **kw).table
    bookings = _gen("booking", 3_000, **kw).table
    lat_of = dict(zip(pings["driver_id"].to_pylist(), pings["lat"].to_pylist(), strict=True))
    city_lat = {c.city_id: c.lat for c in CITIES}
    for driver, city in zip(bookings["driver_id"].to_pylist(), bookings["city_id"].to_pylist(), strict=True):
        if driver:
            assert abs(lat_of[driver] - city_lat[city]) < 0.5


def test_api_log_status_codes_and_latency_tails() -> None:
    t = _gen("api_log", 100_000, duration_s=3_600.0).table
    code = t["status_code"].to_numpy()
    assert ((code == 200) | (code == 201)).mean() > 0.9
    assert ((code >= 400) & (code < 500)).any() and (code >= 500).any()
    assert set(t["method"].to_pylist()) == {"GET", "POST"}
    latency = t["latency_ms"].to_numpy()
    path = t["path"].to_numpy(zero_copy_only=False)
    p99 = {p: np.percentile(latency[path == p], 99) for p in ("/v1/payments/charge", "/v1/customers/me")}
    assert p99["/v1/payments/charge"] > 5 * p99["/v1/customers/me"]
    assert (latency > 0).all() and latency[code == 504].min() >= 30_000


def test_chunks_share_one_world_and_count_exactly() -> None:
    chunks = list(
        generate_chunks(
            "driver_location",
            events_per_s=500.0,
            total=2_750,
            seed=5,
            start=START,
            chunk_s=1.0,
            drivers=50,
            cities=["Surabaya"],
        )
    )
    assert [len(c) for c in chunks] == [500] * 5 + [250]
    micros = np.concatenate([_micros(c) for c in chunks])
    assert micros.min() >= START_US and micros.max() < START_US + 6_000_000
    assert {k for c in chunks for k in c.keys} <= {f"D{i:06d}".encode() for i in range(1, 51)}
    orders = [
        k
        for c in generate_chunks("booking", events_per_s=1_000.0, total=3_000, seed=5, start=START)
        for k in c.keys
    ]
    assert len(set(orders)) == 3_000


def test_chunks_that_fall_behind_the_clock_start_at_it() -> None:
    """A sender slower than its rate: each slice generated more than a slice late starts at the clock, the
    ones on time keep the schedule, and the skipped event time is added up."""
    # the clock when each slice is generated: on time, 0.5 s late (kept), 5 s late, on its new time, 2.5 s late
    late_by = iter([0.0, 0.5, 5.0, 5.0, 7.5])
    slice_no = iter(range(5))
    skipped = [0.0]

    def clock() -> datetime:
        return START + timedelta(seconds=next(slice_no) + next(late_by))

    chunks = list(
        generate_chunks(
            "booking",
            events_per_s=100.0,
            total=500,
            seed=5,
            start=START,
            chunk_s=1.0,
            clock=clock,
            skipped=skipped,
        )
    )
    firsts = [(int(_micros(c).min()) - START_US) / 1e6 for c in chunks]
    lasts = [(int(_micros(c).max()) - START_US) / 1e6 for c in chunks]
    assert [math.floor(f) for f in firsts] == [0, 1, 7, 8, 11]
    assert all(hi - lo < 1.0 for lo, hi in zip(firsts, lasts, strict=True))
    assert skipped == [7.5]
    assert sum(len(c) for c in chunks) == 500


# ---- bad arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"stream": "clicks"}, "unknown stream"),
        ({"count": -1}, "count"),
        ({"seed": -3}, "seed"),
        ({"duration_s": 0.0}, "duration_s"),
        ({"late_fraction": 1.5}, "late_fraction"),
        ({"late_fraction": 0.6, "out_of_order_fraction": 0.6}, "<= 1"),
        ({"late_by_s": (10.0, 5.0)}, "late_by_s"),
        ({"cities": ["Atlantis"]}, "unknown city 'Atlantis'"),
        ({"drivers": 0}, "drivers"),
    ],
)
def test_bad_arguments_raise_a_generate_error(kwargs: dict[str, Any], needle: str) -> None:
    args = {"stream": "driver_location", "count": 10, "seed": 1, "start": START, "duration_s": 60.0, **kwargs}
    with pytest.raises(GenerateError, match=needle) as info:
        generate(args.pop("stream"), args.pop("count"), **args)
    assert isinstance(info.value, DaggerError) and isinstance(info.value, ValueError)


def test_city_lookup() -> None:
    assert city_by_name(" jogja ").name == "Yogyakarta"
    assert [c.name for c in resolve_cities(["Medan", "medan", "Singapore"])] == ["Medan", "Singapore"]
    assert resolve_cities(None) == CITIES
    assert [c.city_id for c in CITIES] == list(range(1, len(CITIES) + 1))
    with pytest.raises(ValueError, match="known cities"):
        resolve_cities([" "])


def test_naive_start_is_utc() -> None:
    assert epoch_micros(datetime(2025, 3, 14, 8, 0)) == START_US
    assert epoch_micros(START + timedelta(microseconds=1)) == START_US + 1


# ---- corrupt ------------------------------------------------------------------------------------


def _fails(parse: Any, payload: bytes) -> bool:
    try:
        parse(payload)
    except (DecodeError, RuntimeError, ValueError):
        return True
    return False


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("with_class", [True, False])
def test_corrupt_payloads_do_not_decode(stream: str, with_class: bool) -> None:
    batch = _gen(stream, 3_000)
    classes = [default_registry().message_class(MESSAGE_NAMES[s]) for s in STREAMS]
    own = default_registry().message_class(MESSAGE_NAMES[stream])
    payloads, bad = corrupt(batch.payloads, 0.1, seed=11, message_class=own if with_class else None)
    assert len(payloads) == 3_000 and len(bad) == 300 and bad == sorted(set(bad))
    bad_set = set(bad)
    for i, payload in enumerate(payloads):
        if i in bad_set:
            assert _fails(own.FromString, payload), (i, payload)
            assert _fails(Empty.FromString, payload)
            if not with_class:  # structural damage: no message type can read it
                assert all(_fails(c.FromString, payload) for c in classes)
        else:
            assert payload is batch.payloads[i]
    assert corrupt(batch.payloads, 0.1, seed=11, message_class=own if with_class else None) == (payloads, bad)


def test_corrupt_edge_cases() -> None:
    payloads = _gen("api_log", 10).payloads
    assert corrupt(payloads, 0.0, seed=1) == (payloads, [])
    out, bad = corrupt(payloads, 1.0, seed=1)
    assert bad == list(range(10)) and all(_fails(Empty.FromString, p) for p in out)
    with pytest.raises(ProduceError):
        corrupt(payloads, 1.5, seed=1)
