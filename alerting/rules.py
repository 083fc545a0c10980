"""Alert rules: threshold rules on an InfluxQL query and no-data (deadman) rules on a measurement.

A threshold rule reads one value per group of tags every ``every`` seconds and compares it with its
``warn`` and ``crit`` conditions; a deadman rule fires when a measurement (or one of its groups)
has had no point for ``period``. Both wait ``for`` seconds before they fire (pending), notify only
when their level changes, and may hold back an alert that flaps (see :mod:`alerting.state`).

Either give ``query`` (InfluxQL with ``$timeFilter`` where the time range goes), or
``measurement``/``field``/``aggregate``/``group_by``/``where`` and the query is built for you.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from alerting.durations import Duration, format_duration
from alerting.template import DEFAULT_DEADMAN_MESSAGE, DEFAULT_MESSAGE, check_template
from job.common.names import DAGGER_NAME_RE, DAGGER_NAME_RULE
from job.common.strict_model import StrictModel

NAME_RE = DAGGER_NAME_RE  # \A…\Z: a trailing newline is no name
TAG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
AGGREGATES = ("mean", "median", "sum", "count", "min", "max", "first", "last", "spread", "stddev")
PERCENTILE_RE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")
VERSUS_SECONDS = {"D-1": 86400.0, "D-7": 7 * 86400.0}


class _Model(StrictModel):
    """A section of an alert rule; a rule never changes once read."""

    model_config = ConfigDict(frozen=True)


def _check_name(v: str) -> str:
    if not NAME_RE.match(v):
        raise ValueError(f"{v!r} must be {DAGGER_NAME_RULE}")
    return v


class Condition(_Model):
    """When a level (warn or crit) holds: exactly one of above, below or outside; with ``versus`` the
    comparison is on the change in percent versus one day (D-1) or one week (D-7) earlier."""

    above: float | None = Field(default=None, description="Holds when the value is greater than this.")
    below: float | None = Field(default=None, description="Holds when the value is less than this.")
    outside: tuple[float, float] | None = Field(
        default=None, description="[low, high]: holds when the value is below low or above high."
    )
    versus: Literal["D-1", "D-7"] | None = Field(
        default=None,
        description="Compare the change in percent, (value - past) / |past| * 100, with the same query one day "
        "(D-1) or one week (D-7) earlier, instead of the value itself.",
    )

    @field_validator("versus", mode="before")
    @classmethod
    def _versus(cls, v: Any) -> Any:
        if isinstance(v, str):
            norm = v.strip().upper().replace("_", "-")
            return {"D1": "D-1", "D7": "D-7", "1D": "D-1", "7D": "D-7"}.get(norm, norm)
        return v

    @model_validator(mode="after")
    def _one(self) -> Condition:
        given = [k for k in ("above", "below", "outside") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of above, below or outside"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.outside is not None and not self.outside[0] < self.outside[1]:
            raise ValueError(f"outside needs [low, high] with low < high, not {list(self.outside)}")
        return self

    def holds(self, value: float | None, past: float | None = None) -> bool:
        """Return True when the condition holds for ``value`` (and ``past``, the D-1/D-7 value, if ``versus``).

        A missing value, or a missing or zero past value for a change condition, never holds.
        """
        subject = self.subject(value, past)
        if subject is None:
            return False
        if self.above is not None:
            return subject > self.above
        if self.below is not None:
            return subject < self.below
        assert self.outside is not None
        return subject < self.outside[0] or subject > self.outside[1]

    def subject(self, value: float | None, past: float | None) -> float | None:
        """Return what is compared: the value, or its change in percent versus ``past`` (None when unknown)."""
        if value is None:
            return None
        if self.versus is None:
            return value
        if past is None or past == 0:
            return None
        return (value - past) / abs(past) * 100.0

    def describe(self) -> str:
        """Return the condition for people: ``above 200``, ``outside [10, 90]``, ``change vs D-7 below -50%``."""
        unit = "%" if self.versus else ""
        if self.above is not None:
            text = f"above {self.above:g}{unit}"
        elif self.below is not None:
            text = f"below {self.below:g}{unit}"
        else:
            assert self.outside is not None
            text = f"outside [{self.outside[0]:g}{unit}, {self.outside[1]:g}{unit}]"
        return f"change vs {self.versus} {text}" if self.versus else text


class FlappingSpec(_Model):
    """Flapping detection as in Kapacitor/Nagios: over the last ``history`` evaluations, the share of level
    changes (recent ones weigh more) above ``high`` starts holding notifications back; below ``low`` stops."""

    low: float = Field(
        default=0.25, ge=0, le=1, description="Below this share of changes the alert stops flapping."
    )
    high: float = Field(
        default=0.5, ge=0, le=1, description="Above this share of changes the alert is flapping."
    )
    history: int = Field(
        default=21, ge=3, le=200, description="How many evaluations the share is computed over."
    )

    @model_validator(mode="after")
    def _order(self) -> FlappingSpec:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be less than high ({self.high})")
        return self


class _RuleBase(_Model):
    name: str = Field(description="The rule's name: lower-case letters, digits and dashes; unique.")
    team: str = Field(min_length=1, description="The team that owns the rule; routes use it (label team).")
    description: str = Field(default="", description="What the rule watches, for people.")
    every: Duration = Field(default=60.0, description="How often the rule is evaluated (e.g. 30s, 1m).")
    for_: Duration = Field(
        default=0.0,
        alias="for",
        description="Pending period: how long a level must hold, evaluation after evaluation, before it fires.",
    )
    measurement: str | None = Field(default=None, description="The InfluxDB measurement the rule reads.")
    field: str | None = Field(default=None, description="The field the rule reads.")
    where: dict[str, str | list[str]] = Field(
        default_factory=dict, description="Tag filters: tag: value, or tag: [values] for any of them."
    )
    group_by: list[str] = Field(default_factory=list, description="Tags to group by: one alert per group.")
    offset: Duration = Field(
        default=0.0, description="Shift the time range back by this much (for windows that land late)."
    )
    database: str | None = Field(default=None, description="The database (default: influx.database).")
    retention_policy: str | None = Field(
        default=None, description="The retention policy (default: the database's)."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Extra labels, for routing and silences."
    )
    flapping: FlappingSpec | None = Field(
        default=None,
        description="Hold back notifications while the alert keeps changing level (off by default).",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v)

    @field_validator("group_by")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        for tag in v:
            if not TAG_RE.fullmatch(tag):
                raise ValueError(f"{tag!r} is not a tag name")
        if len(set(v)) != len(v):
            raise ValueError(f"a tag is named twice in {v}")
        return v

    @field_validator("where")
    @classmethod
    def _where(cls, v: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for tag, values in v.items():
            if not TAG_RE.fullmatch(tag):
                raise ValueError(f"{tag!r} is not a tag name")
            if isinstance(values, list) and not values:
                raise ValueError(f"{tag}: give at least one value")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        reserved = {"alertname", "rule", "team", "severity"} & set(v)
        if reserved:
            raise ValueError(f"{', '.join(sorted(reserved))} is set by the engine; choose another label name")
        return v

    @field_validator("every")
    @classmethod
    def _every(cls, v: float) -> float:
        if v < 1:
            raise ValueError(f"must be at least 1s, not {format_duration(v)}")
        return v


class ThresholdRule(_RuleBase):
    """Fires per group when its value meets ``warn`` or ``crit`` (crit wins) for the pending period."""

    kind: Literal["threshold"] = Field(default="threshold", description="threshold (the default) or deadman.")
    query: str | None = Field(
        default=None,
        description="InfluxQL returning one value per group; $timeFilter is replaced by the time range. "
        "Instead of measurement/field/aggregate.",
    )
    aggregate: str = Field(
        default="mean",
        description=f"How the window's points become one value: {', '.join(AGGREGATES)} or pNN (percentile).",
    )
    window: Duration = Field(
        default=300.0, description="The time range each evaluation reads, ending now - offset."
    )
    warn: Condition | None = Field(default=None, description="When the level is WARN.")
    crit: Condition | None = Field(default=None, description="When the level is CRIT (checked first).")
    on_no_data: Literal["ok", "keep", "warn", "crit"] = Field(
        default="ok",
        description="The level of a group that had an alert state but returned no value: ok (resolve), keep "
        "(its last level), warn or crit. Use a deadman rule to alert on missing output.",
    )
    message: str = Field(
        default=DEFAULT_MESSAGE, description="The notification text (see alerting.template)."
    )

    @field_validator("aggregate")
    @classmethod
    def _aggregate(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in AGGREGATES and not PERCENTILE_RE.match(v):
            raise ValueError(
                f"{v!r} is not an aggregate; use one of {', '.join(AGGREGATES)} or pNN (e.g. p95)"
            )
        m = PERCENTILE_RE.match(v)
        if m and not 0 < float(m.group(1)) < 100:
            raise ValueError(f"{v!r}: a percentile is between p1 and p99")
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | None) -> str | None:
        if v is None:
            return v
        text = v.strip()
        if not re.match(r"(?is)^select\s", text):
            raise ValueError("query must be one InfluxQL SELECT statement")
        if ";" in text:
            raise ValueError("query must be one statement (no ';')")
        if re.search(r"(?i)\binto\b", text):
            raise ValueError("query must not write (SELECT … INTO)")
        if "$timeFilter" not in text:
            raise ValueError(
                'query needs $timeFilter in its WHERE clause, e.g. WHERE $timeFilter GROUP BY "city"'
            )
        return text

    @field_validator("window")
    @classmethod
    def _window(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be more than 0s")
        return v

    @model_validator(mode="after")
    def _complete(self) -> ThresholdRule:
        if self.query is None:
            if not self.measurement or not self.field:
                raise ValueError("give query, or measurement and field (with aggregate, group_by, where)")
        elif self.measurement or self.field or self.where or self.group_by:
            raise ValueError("give either query or measurement/field/where/group_by, not both")
        if self.warn is None and self.crit is None:
            raise ValueError("give warn, crit or both")
        return self

    @field_validator("message")
    @classmethod
    def _message(cls, v: str, info: ValidationInfo) -> str:
        data = info.data
        if data.get("query") is not None:
            check_template(v, None)
        else:
            field = data.get("field")
            check_template(
                v, [*data.get("group_by", []), *data.get("labels", {})], numeric=[field] if field else []
            )
        return v

    def conditions(self) -> list[tuple[str, Condition]]:
        """Return the (severity, condition) pairs, crit first."""
        return [(s, c) for s, c in (("crit", self.crit), ("warn", self.warn)) if c is not None]

    def versus(self) -> set[str]:
        """Return the comparisons (D-1, D-7) the conditions need."""
        return {c.versus for _, c in self.conditions() if c.versus}


class DeadmanRule(_RuleBase):
    """Fires when a measurement (or a group of it that had data within ``lookback``) has no point for ``period``."""

    kind: Literal["deadman"] = Field(description="deadman: alert when output stops.")
    measurement: str = Field(description="The measurement the dagger writes.")
    period: Duration = Field(description="How long without a single point before the alert fires (e.g. 5m).")
    lookback: Duration = Field(
        default=3600.0,
        description="With group_by: a group that had points within this time and has none within period fires.",
    )
    severity: Literal["warn", "crit"] = Field(default="crit", description="The level the alert fires with.")
    dagger: str | None = Field(default=None, description="The dagger whose output this is (label dagger).")
    message: str = Field(default=DEFAULT_DEADMAN_MESSAGE, description="The notification text.")

    @model_validator(mode="after")
    def _complete(self) -> DeadmanRule:
        if self.period <= 0:
            raise ValueError("period must be more than 0s")
        if self.group_by and self.lookback <= self.period:
            raise ValueError("lookback must be longer than period")
        return self

    @field_validator("message")
    @classmethod
    def _message(cls, v: str, info: ValidationInfo) -> str:
        check_template(v, [*info.data.get("group_by", []), *info.data.get("labels", {}), "measurement"])
        return v

    def condition_text(self) -> str:
        """Return ``no data for 5m``."""
        return f"no data for {format_duration(self.period)}"


def _rule_kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("kind", "threshold"))
    return str(getattr(value, "kind", "threshold"))


Rule = Annotated[
    Annotated[ThresholdRule, Tag("threshold")] | Annotated[DeadmanRule, Tag("deadman")],
    Discriminator(
        _rule_kind, custom_error_type="rule_kind", custom_error_message="kind must be threshold or deadman"
    ),
]
"""A threshold rule (the default kind) or a deadman rule."""
