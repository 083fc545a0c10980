"""Known dagger-shaped points for the Atlas tests, written to a REAL InfluxDB (the ``influxdb`` fixture).

Windows are one minute long; a point's time is its window's end, as the Influx sink writes it.
``E`` is 2025-11-22 08:00:00 UTC. The cell ids come from s2sphere (tests/helpers.py), not from the
code under test.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.helpers import s2_signed

if TYPE_CHECKING:
    from tests.services import InfluxHandle

E = 1_763_798_400
DAY = 86_400

JAKARTA = (-6.2088, 106.8456)
JAKARTA_EAST = (-6.2088, 106.8456 + 3.0 / (111.32 * 0.99413))  # ~3 km east of the centre
BANDUNG = (-6.9175, 107.6191)
MEXICO_CITY = (19.4326, -99.1332)  # on S2 face 4: a negative signed id


@dataclass(frozen=True)
class KnownCells:
    """The signed decimal ids of the known cells and the database holding them."""

    db: str
    k1: str  # Jakarta centre
    k2: str  # 3 km east of it
    k3: str  # Bandung centre
    k4: str  # Mexico City (drivers_per_s2 only)


def known_lines() -> tuple[list[str], KnownCells]:
    """Return the line-protocol points (precision s) and the cells they are about (db left empty)."""
    k1, k2, k3, k4 = (s2_signed(*p) for p in (JAKARTA, JAKARTA_EAST, BANDUNG, MEXICO_CITY))

    def booking(cell: str, city: int, vehicle: str, n: int, dist: float, t: int) -> str:
        return (
            f"bookings_per_s2,tag_city_id={city},tag_s2id={cell},tag_vehicle_type={vehicle} "
            f"num_of_bookings={n}i,avg_distance_km={dist} {t}"
        )

    def drivers(cell: str, status: str, n: int, t: int) -> str:
        return f"drivers_per_s2,tag_s2id={cell},tag_driver_status={status} drivers={n}i {t}"

    lines = [
        booking(k1, 1, "CAR", 42, 3.5, E),
        booking(k1, 1, "BIKE", 8, 2.25, E),
        booking(k1, 1, "CAR", 5, 4.0, E - 60),
        booking(k1, 1, "CAR", 30, 3.0, E - DAY),
        booking(k1, 1, "BIKE", 4, 1.5, E - DAY),
        booking(k1, 1, "CAR", 50, 3.0, E - 7 * DAY),
        booking(k2, 1, "CAR", 10, 6.0, E),
        booking(k3, 2, "CAR", 7, 5.0, E),
        booking(k3, 2, "BIKE", 3, 4.5, E),
        booking(k3, 2, "BIKE", 1, 1.0, E - 120),
        drivers(k1, "AVAILABLE", 12, E),
        drivers(k1, "BUSY", 5, E),
        drivers(k4, "AVAILABLE", 4, E),
    ]
    return lines, KnownCells("", k1, k2, k3, k4)


def write_known(influx: InfluxHandle, background: bool = False) -> KnownCells:
    """Create a fresh database, write the known points (and, with ``background``, sample points for
    Jakarta and Bandung in the same windows, leaving the known cells alone); return the cells."""
    db = f"atlas_{uuid.uuid4().hex[:8]}"
    influx.create_database(db)
    lines, cells = known_lines()
    if background:
        from web_atlas.areas import area_by_name
        from web_atlas.sample import sample_points

        known = {f"tag_s2id={c}," for c in (cells.k1, cells.k2, cells.k3)}
        sample = sample_points(
            [area_by_name("Jakarta"), area_by_name("Bandung")],
            [E - 120, E - 60, E, E - DAY, E - 7 * DAY],
            seed=11,
        )
        lines += [line for line in sample.lines if not any(k in line for k in known)]
    influx.write("\n".join(lines), db, precision="s")
    return KnownCells(db, cells.k1, cells.k2, cells.k3, cells.k4)


@pytest.fixture(scope="module")
def known_db(influxdb: InfluxHandle) -> KnownCells:
    """A database with only the known points."""
    return write_known(influxdb)


@pytest.fixture(scope="module")
def city_db(influxdb: InfluxHandle) -> KnownCells:
    """A database with the known points among realistic sample demand in Jakarta and Bandung."""
    return write_known(influxdb, background=True)
