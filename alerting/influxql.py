"""InfluxQL for the rules: queries built from measurement/field/aggregate/group_by, explicit time ranges,
and a small reader for InfluxDB's v1 ``/query`` API.

Every evaluation reads an explicit range ``(start, end]`` rather than ``now()``, so a rule can be
evaluated for any moment (``daggers alerts test RULE --at …``) and the D-1/D-7 comparison is the
same query shifted by a day or a week.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from alerting.errors import AlertQueryError
from alerting.rules import PERCENTILE_RE, DeadmanRule, ThresholdRule


def quote_ident(name: str) -> str:
    """Return ``name`` as a double-quoted InfluxQL identifier."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_string(value: str) -> str:
    """Return ``value`` as a single-quoted InfluxQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def time_literal(epoch_s: float) -> str:
    """Return an RFC 3339 UTC time literal for InfluxQL (microsecond precision, trailing zeros cut)."""
    dt = datetime.fromtimestamp(epoch_s, tz=UTC)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        text += f".{dt.microsecond:06d}".rstrip("0")
    return f"'{text}Z'"


def time_filter(start: float, end: float) -> str:
    """Return ``time > 'start' AND time <= 'end'`` (epoch seconds)."""
    return f"time > {time_literal(start)} AND time <= {time_literal(end)}"


def source(measurement: str, database: str | None = None, retention_policy: str | None = None) -> str:
    """Return the FROM target: ``"db"."rp"."measurement"`` (db and rp optional)."""
    if database:
        return ".".join(
            [
                quote_ident(database),
                quote_ident(retention_policy) if retention_policy else "",
                quote_ident(measurement),
            ]
        )
    if retention_policy:
        return f"{quote_ident(retention_policy)}.{quote_ident(measurement)}"
    return quote_ident(measurement)


def where_clause(where: Mapping[str, str | list[str]]) -> str:
    """Return the tag filters as ``("t" = 'a' OR "t" = 'b') AND "u" = 'c'`` (empty for none)."""
    parts = []
    for tag, values in where.items():
        options = values if isinstance(values, list) else [values]
        ors = [f"{quote_ident(tag)} = {quote_string(str(v))}" for v in options]
        parts.append(ors[0] if len(ors) == 1 else "(" + " OR ".join(ors) + ")")
    return " AND ".join(parts)


def aggregate_expr(aggregate: str, field_name: str) -> str:
    """Return the selector, e.g. ``mean("f")`` or ``percentile("f", 95)`` for ``p95``."""
    m = PERCENTILE_RE.match(aggregate)
    if m:
        return f"percentile({quote_ident(field_name)}, {m.group(1)})"
    return f"{aggregate}({quote_ident(field_name)})"


def _group_by(tags: list[str]) -> str:
    return " GROUP BY " + ", ".join(quote_ident(t) for t in tags) if tags else ""


def threshold_query(rule: ThresholdRule, start: float, end: float, database: str | None = None) -> str:
    """Return the InfluxQL of ``rule`` over ``(start, end]`` (raw queries get ``$timeFilter`` replaced)."""
    if rule.query is not None:
        return rule.query.replace("$timeFilter", time_filter(start, end))
    assert rule.measurement and rule.field
    conds = [c for c in (where_clause(rule.where), time_filter(start, end)) if c]
    return (
        f'SELECT {aggregate_expr(rule.aggregate, rule.field)} AS "value" '
        f"FROM {source(rule.measurement, rule.database or database, rule.retention_policy)} "
        f"WHERE {' AND '.join(conds)}{_group_by(rule.group_by)}"
    )


def count_query(rule: DeadmanRule, start: float, end: float, database: str | None = None) -> str:
    """Return the InfluxQL that counts ``rule``'s points over ``(start, end]``, per group."""
    target = quote_ident(rule.field) if rule.field else "*"
    conds = [c for c in (where_clause(rule.where), time_filter(start, end)) if c]
    return (
        f"SELECT count({target}) FROM {source(rule.measurement, rule.database or database, rule.retention_policy)} "
        f"WHERE {' AND '.join(conds)}{_group_by(rule.group_by)}"
    )


# ---- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupValue:
    """One group's result: its tags, the newest non-null value of the first value column, and that time."""

    tags: dict[str, str] = field(default_factory=dict)
    value: float | None = None
    time_ms: int | None = None
    columns: dict[str, float | None] = field(default_factory=dict)

    def key(self) -> tuple[tuple[str, str], ...]:
        """Return the tags as a sorted tuple (a dict key)."""
        return tuple(sorted(self.tags.items()))


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v) if math.isfinite(v) else None
    return None


def parse_series(body: Mapping[str, Any]) -> list[GroupValue]:
    """Return one GroupValue per series of an InfluxDB ``/query`` answer (``epoch=ms``).

    Each group's ``value`` is the newest non-null number in its first column after ``time``;
    ``columns`` holds every numeric column of that row (for ``count(*)``'s several columns).
    """
    out: list[GroupValue] = []
    for result in body.get("results", []):
        for series in result.get("series", []) or []:
            cols: list[str] = series.get("columns", [])
            tags = {str(k): "" if v is None else str(v) for k, v in (series.get("tags") or {}).items()}
            value_cols = [i for i, c in enumerate(cols) if c != "time"]
            best: GroupValue | None = None
            for row in series.get("values", []) or []:
                numbers = {cols[i]: _number(row[i]) for i in value_cols}
                first = numbers.get(cols[value_cols[0]]) if value_cols else None
                if first is None and not any(v is not None for v in numbers.values()):
                    continue
                t = row[cols.index("time")] if "time" in cols else None
                candidate = GroupValue(tags, first, int(t) if isinstance(t, int | float) else None, numbers)
                if best is None or (candidate.time_ms or 0) >= (best.time_ms or 0):
                    best = candidate
            out.append(best or GroupValue(tags, None, None, {}))
    return out


class InfluxReader:
    """Runs InfluxQL against one InfluxDB (v1 ``/query``), returning one value per group."""

    def __init__(
        self,
        url: str,
        database: str,
        *,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.database = database
        self.timeout = timeout
        self._auth = (username, password or "") if username else None
        self._session = session or requests.Session()

    def __repr__(self) -> str:
        return f"InfluxReader({self.url!r}, database={self.database!r})"

    def query(self, q: str, database: str | None = None) -> list[GroupValue]:
        """Run ``q`` and return its groups (empty when nothing matched).

        Raises:
            AlertQueryError: InfluxDB cannot be reached, answers an error, or reports one for the statement.
        """
        params = {"q": q, "db": database or self.database, "epoch": "ms"}
        try:
            resp = self._session.get(
                f"{self.url}/query", params=params, timeout=self.timeout, auth=self._auth
            )
        except requests.RequestException as exc:
            raise AlertQueryError(
                f"InfluxDB at {self.url} cannot be reached ({type(exc).__name__})"
            ) from None
        try:
            body: dict[str, Any] = resp.json()
        except ValueError:
            body = {}
        reported = [body.get("error")] + [r.get("error") for r in body.get("results", [])]
        errors = [str(e) for e in reported if e]
        if resp.status_code >= 400 or errors:
            detail = "; ".join(errors) or f"HTTP {resp.status_code}"
            raise AlertQueryError(f"InfluxDB refused the query: {detail}", hint=f"the query was: {q}")
        return parse_series(body)

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()
