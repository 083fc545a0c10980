"""Read benchmark results back from InfluxDB 1.x with InfluxQL (``/query``)."""

from __future__ import annotations

from typing import Any

import requests


def query(url: str, db: str, q: str, epoch: str = "s", timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run ``q``; return the series of its first result ([] when none). Raises requests.HTTPError."""
    resp = requests.get(f"{url}/query", params={"db": db, "q": q, "epoch": epoch}, timeout=timeout)
    resp.raise_for_status()
    body = resp.json()
    results = body.get("results") or [{}]
    if results[0].get("error"):
        raise RuntimeError(f"InfluxDB: {results[0]['error']} ({q})")
    return results[0].get("series") or []


def points(
    url: str, db: str, measurement: str, fields: tuple[str, ...], tags: tuple[str, ...], epoch: str = "s"
) -> dict[tuple, tuple]:
    """Return every point of ``measurement``: (time, *tag values) -> field values (in ``fields`` order)."""
    out: dict[tuple, tuple] = {}
    for series in query(url, db, f'SELECT * FROM "{measurement}"', epoch):
        cols = series["columns"]
        for values in series["values"]:
            row = dict(zip(cols, values, strict=True))
            out[(int(row["time"]), *[str(row[t]) for t in tags])] = tuple(row.get(f) for f in fields)
    return out


def count(url: str, db: str, measurement: str, field: str) -> int:
    """Return how many points of ``measurement`` have ``field``."""
    series = query(url, db, f'SELECT count("{field}") FROM "{measurement}"')
    return int(series[0]["values"][0][1]) if series else 0


def counts_per_window(
    url: str, db: str, measurement: str, field: str, since_s: int, window_s: int = 60
) -> dict[int, int]:
    """Return window time (s) -> points of ``measurement`` at that time, for times >= ``since_s``."""
    q = f'SELECT count("{field}") FROM "{measurement}" WHERE time >= {since_s}s GROUP BY time({window_s}s)'
    out: dict[int, int] = {}
    for series in query(url, db, q):
        for t, n in series["values"]:
            if n:
                out[int(t)] = int(n)
    return out


def one_tag_value(url: str, db: str, measurement: str, tag: str, at_s: int) -> str | None:
    """Return the ``tag`` value of one point of ``measurement`` at time ``at_s`` (None when there is none)."""
    series = query(url, db, f'SELECT * FROM "{measurement}" WHERE time = {at_s}s LIMIT 1')
    if not series:
        return None
    row = dict(zip(series[0]["columns"], series[0]["values"][0], strict=True))
    return None if row.get(tag) is None else str(row[tag])


def windows_of_series(
    url: str, db: str, measurement: str, field: str, tag: str, value: str, since_s: int, window_s: int = 60
) -> set[int]:
    """Return the window times (s) >= ``since_s`` at which the one series ``tag=value`` has a point.

    One series: cheap for InfluxDB, unlike a count over every series of a 44,000-cell measurement,
    which costs it a fraction of a core at a few queries a second."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    q = (
        f'SELECT count("{field}") FROM "{measurement}" WHERE "{tag}" = \'{escaped}\' AND time >= {since_s}s '
        f"GROUP BY time({window_s}s)"
    )
    return {int(t) for series in query(url, db, q) for t, n in series["values"] if n}
