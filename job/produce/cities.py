"""The cities synthetic events happen in: real city centres, a service radius and a city id.

``weight`` is the city's share of drivers, bookings and requests when several cities are chosen
(roughly the size of its ride-hailing market). ``city_id`` is the ``BookingLog.city_id`` value and
is stable: new cities get new ids at the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class City:
    """One service area: a centre, a radius that every generated point stays within, and an id."""

    city_id: int
    name: str
    lat: float
    long: float
    radius_km: float
    weight: float
    aliases: tuple[str, ...] = ()


CITIES: tuple[City, ...] = (
    City(1, "Jakarta", -6.2088, 106.8456, 30.0, 30.0),
    City(2, "Bandung", -6.9175, 107.6191, 15.0, 8.0),
    City(3, "Surabaya", -7.2575, 112.7521, 18.0, 9.0),
    City(4, "Yogyakarta", -7.7956, 110.3695, 12.0, 4.0, ("Jogja", "Jogjakarta")),
    City(5, "Medan", 3.5952, 98.6722, 15.0, 6.0),
    City(6, "Denpasar", -8.6705, 115.2126, 15.0, 5.0, ("Bali",)),
    City(7, "Makassar", -5.1477, 119.4327, 12.0, 4.0),
    City(8, "Semarang", -6.9667, 110.4167, 14.0, 4.0),
    City(9, "Singapore", 1.3521, 103.8198, 18.0, 10.0),
    City(10, "Bangkok", 13.7563, 100.5018, 25.0, 12.0),
)

_BY_NAME: dict[str, City] = {key.casefold(): city for city in CITIES for key in (city.name, *city.aliases)}


def city_names() -> list[str]:
    """Return the names of all known cities, in city id order."""
    return [c.name for c in CITIES]


def city_by_name(name: str) -> City:
    """Return the city called ``name`` (case-insensitive; aliases such as "Bali" work).

    Raises:
        ValueError: naming the unknown city and listing the known ones.
    """
    city = _BY_NAME.get(name.strip().casefold())
    if city is None:
        raise ValueError(f"unknown city {name!r}; known cities: {', '.join(city_names())}")
    return city


def resolve_cities(names: Iterable[str] | None) -> tuple[City, ...]:
    """Return the cities called ``names`` (all cities when None), without duplicates, in the given order.

    Raises:
        ValueError: for an unknown name or an empty selection.
    """
    if names is None:
        return CITIES
    chosen: dict[int, City] = {}
    for name in names:
        if name.strip():
            city = city_by_name(name)
            chosen.setdefault(city.city_id, city)
    if not chosen:
        raise ValueError(f"no city chosen; known cities: {', '.join(city_names())}")
    return tuple(chosen.values())


__all__ = ["CITIES", "City", "city_by_name", "city_names", "resolve_cities"]
