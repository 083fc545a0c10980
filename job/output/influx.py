"""Read a dagger's output back from its InfluxDB sink with InfluxQL (v1 ``/query``), like the original
page's ``SELECT sum(*) FROM <measurement> WHERE time > now() - 900s GROUP BY time(30s)``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import requests

from job.output.model import OutputError
from job.spec import InfluxSinkSpec


def _ident(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tag_key(column: str) -> str:
    """Return the InfluxDB tag of an output column: ``label_city`` is ``city``; ``tag_*`` keep their name."""
    return column.removeprefix("label_") if column.startswith("label_") else column


class InfluxOutput:
    """Sums of one field per step from the sink's measurement."""

    def __init__(self, spec: InfluxSinkSpec, timeout_s: float = 30.0) -> None:
        if spec.api != "v1":
            raise OutputError(
                "reading a dagger's output from an InfluxDB api v2 sink is not supported",
                hint="add an api v1 influx sink, or a postgres or elasticsearch one",
            )
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.timeout_s = timeout_s
        self.auth = (
            (spec.username, spec.password.get_secret_value() if spec.password else "")
            if spec.username
            else None
        )

    def describe(self) -> str:
        """Return what the points are read from, for people (without the server)."""
        return f"measurement {self.spec.measurement} in database {self.spec.database}"

    def server(self) -> str:
        """Return the server the points are read from."""
        return self.url

    def _query(self, q: str) -> list[dict[str, Any]]:
        try:
            resp = requests.get(
                f"{self.url}/query",
                params={"db": self.spec.database or "", "q": q, "epoch": "ms"},
                auth=self.auth,
                timeout=self.timeout_s,
            )
        except requests.RequestException as exc:
            raise OutputError(f"InfluxDB at {self.url} is unreachable: {type(exc).__name__}") from None
        if resp.status_code in (401, 403):
            raise OutputError(f"InfluxDB at {self.url} refused the credentials (HTTP {resp.status_code})")
        try:
            body = resp.json()
        except ValueError:
            raise OutputError(
                f"InfluxDB at {self.url} answered HTTP {resp.status_code}: {resp.text[:200]}"
            ) from None
        results = body.get("results") or [{}]
        error = body.get("error") or results[0].get("error")
        if error:
            if "database not found" in str(error):
                return []
            raise OutputError(f"InfluxDB at {self.url} refused the query: {error}")
        return results[0].get("series") or []

    def fields(self) -> list[str]:
        """Return the numeric fields of the measurement, sorted."""
        series = self._query(f"SHOW FIELD KEYS FROM {_ident(self.spec.measurement)}")
        return sorted(
            name for s in series for name, kind in s.get("values") or [] if kind in ("integer", "float")
        )

    def read(
        self, field: str, start: datetime, end: datetime, step_s: int, tag: tuple[str, str] | None
    ) -> list[tuple[datetime, float]]:
        """Return (step start, sum of ``field``) for each step of (start, end] that has points, oldest first.

        Raises OutputError: the server is down or refuses, or the measurement has no such numeric field.
        """
        known = self.fields()
        if known and field not in known:
            raise OutputError(
                f"measurement {self.spec.measurement} has no numeric field {field!r}",
                hint=f"choose one of: {', '.join(known)}",
            )
        where = [f"time > {int(start.timestamp() * 1000)}ms", f"time <= {int(end.timestamp() * 1000)}ms"]
        if tag is not None:
            where.append(f"{_ident(tag_key(tag[0]))} = {_literal(tag[1])}")
        q = (
            f"SELECT sum({_ident(field)}) FROM {_ident(self.spec.measurement)} WHERE {' AND '.join(where)} "
            f"GROUP BY time({step_s}s) fill(none)"
        )
        out: list[tuple[datetime, float]] = []
        for s in self._query(q):
            for ts, value in s.get("values") or []:
                if value is not None:
                    out.append((datetime.fromtimestamp(ts / 1000, UTC), float(value)))
        return sorted(out)
