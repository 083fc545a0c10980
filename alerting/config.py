"""The alert engine's configuration: one YAML file (plus rule files it names), validated by pydantic.

Every bad value is reported as ``file:LINE: field.path: message``, e.g.
``alerts.yaml:31: rules[2] (bookings-drop).crit.above: Input should be a valid number``.
``${VAR}`` and ``${VAR:-default}`` are read from the environment, so webhook URLs, routing keys and
passwords need not be in the file; they are held as secrets and never printed.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from alerting.durations import Duration
from alerting.errors import AlertConfigError
from alerting.matchers import Matcher, parse_matchers
from alerting.rules import DeadmanRule, Rule, ThresholdRule
from job.common.strict_model import StrictModel
from job.errors import SpecError
from job.spec.wording import problem, written_as

CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")


class _Model(StrictModel):
    """A section of the alerting configuration."""


def _http_url(v: SecretStr) -> SecretStr:
    parts = urlsplit(v.get_secret_value())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL (the value is a secret and is not shown)")
    return v


# ---- InfluxDB, store, delivery ------------------------------------------------------------------


class InfluxSpec(_Model):
    """The InfluxDB the rules query (v1 /query API, InfluxQL)."""

    url: str = Field(default="http://127.0.0.1:8086", description="InfluxDB base URL.")
    database: str = Field(default="daggers", description="The database rules read unless they name another.")
    username: str | None = Field(default=None, description="User name, if auth is on.")
    password: SecretStr | None = Field(default=None, description="Password (never logged).")
    timeout: Duration = Field(default=10.0, description="Seconds one query may take.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v.rstrip("/")


class StoreSpec(_Model):
    """Where alert state, history, the outbox, silences and the scheduler's jobs are kept."""

    url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL: sqlite:///path/alerts.db (default: <state dir>/alerts.db) or "
        "postgresql+psycopg://user:${PASSWORD}@host/db to share it. Held as a secret.",
    )
    lease_ttl: Duration = Field(
        default=30.0, description="How long the running engine's lease on the store lasts without renewal."
    )
    history_retention: Duration = Field(
        default=30 * 86400.0, description="History and delivered notifications older than this are deleted."
    )


class DeliverySpec(_Model):
    """How notifications leave the outbox: retries with exponential back-off until delivered or given up."""

    dispatch_interval: Duration = Field(
        default=5.0, description="How often the outbox is checked for due notifications."
    )
    backoff_initial: Duration = Field(
        default=5.0, description="Wait before the first retry of a failed send."
    )
    backoff_factor: float = Field(
        default=2.0, ge=1.0, le=10.0, description="Each retry waits this much longer."
    )
    backoff_max: Duration = Field(default=300.0, description="The longest wait between two tries.")
    backoff_jitter: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Random share added to each wait, so channels are not hit in step.",
    )
    give_up_after: Duration = Field(
        default=86400.0,
        description="A notification still undelivered this long after it was queued is dropped "
        "(and logged as failed).",
    )
    timeout: Duration = Field(default=10.0, description="Seconds one send may take.")
    batch: int = Field(
        default=200, ge=1, le=10_000, description="Notifications sent per dispatch round at most."
    )

    @model_validator(mode="after")
    def _order(self) -> DeliverySpec:
        if self.backoff_max < self.backoff_initial:
            raise ValueError("backoff_max must not be less than backoff_initial")
        if self.dispatch_interval <= 0 or self.timeout <= 0:
            raise ValueError("dispatch_interval and timeout must be more than 0s")
        return self


# ---- channels -----------------------------------------------------------------------------------


class SlackChannel(_Model):
    """A Slack incoming webhook."""

    type: Literal["slack"]
    url: SecretStr = Field(description="The incoming webhook URL (a secret: never logged).")
    channel: str | None = Field(
        default=None, description="Override the webhook's channel, e.g. #bookings-alerts."
    )
    username: str | None = Field(default=None, description="Override the webhook's user name.")
    icon_emoji: str | None = Field(
        default=None, description="Override the webhook's icon, e.g. :rotating_light:."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: SecretStr) -> SecretStr:
        return _http_url(v)


class PagerDutyChannel(_Model):
    """PagerDuty Events API v2: trigger and resolve with a stable dedup_key per alert."""

    type: Literal["pagerduty"]
    routing_key: SecretStr = Field(description="The integration's routing key (a secret: never logged).")
    url: str = Field(
        default="https://events.pagerduty.com/v2/enqueue", description="The Events API v2 endpoint."
    )
    source: str = Field(default="daggers", description="payload.source: where the alerts come from.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError(f"{v!r} is not an http(s) URL")
        return v


class WebhookChannel(_Model):
    """A generic HTTP endpoint that receives each notification as JSON (POST)."""

    type: Literal["webhook"]
    url: SecretStr = Field(description="The endpoint (a secret: tokens often ride in it; never logged).")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="Extra headers, e.g. Authorization."
    )
    hmac_secret: SecretStr | None = Field(
        default=None, description="When set, X-Daggers-Signature: sha256=<HMAC of the body> is sent."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: SecretStr) -> SecretStr:
        return _http_url(v)


class EmailChannel(_Model):
    """E-mail over SMTP."""

    type: Literal["email"]
    host: str = Field(description="SMTP server host.")
    port: int = Field(
        default=25, ge=1, le=65535, description="SMTP server port (587 with starttls, 465 with ssl)."
    )
    security: Literal["none", "starttls", "ssl"] = Field(default="none", description="Transport security.")
    username: str | None = Field(default=None, description="SMTP user, if the server needs a login.")
    password: SecretStr | None = Field(default=None, description="SMTP password (never logged).")
    sender: str = Field(description="The From address.")
    to: list[str] = Field(min_length=1, description="Recipients.")

    @field_validator("sender")
    @classmethod
    def _sender(cls, v: str) -> str:
        if "@" not in v:
            raise ValueError(f"{v!r} is not an e-mail address")
        return v

    @field_validator("to")
    @classmethod
    def _to(cls, v: list[str]) -> list[str]:
        for addr in v:
            if "@" not in addr:
                raise ValueError(f"{addr!r} is not an e-mail address")
        return v


Channel = Annotated[
    SlackChannel | PagerDutyChannel | WebhookChannel | EmailChannel, Field(discriminator="type")
]
CHANNEL_TYPES = ("slack", "pagerduty", "webhook", "email")


# ---- routes and silences ------------------------------------------------------------------------


class RouteSpec(_Model):
    """Send alerts whose labels match to channels. Routes are tried in order; the first that matches wins
    unless it says ``continue: true``."""

    matchers: list[str] | dict[str, str] = Field(
        default_factory=list,
        description="Label matchers (team=bookings, severity=~crit|warn); none: all alerts.",
    )
    channels: list[str] = Field(min_length=1, description="Channel names.")
    continue_: bool = Field(
        default=False, alias="continue", description="Also try the routes after this one."
    )

    @field_validator("matchers")
    @classmethod
    def _matchers(cls, v: list[str] | dict[str, str]) -> list[str] | dict[str, str]:
        parse_matchers(v)
        return v

    def parsed(self) -> tuple[Matcher, ...]:
        """Return the route's matchers."""
        return parse_matchers(self.matchers)


class SilenceSpec(_Model):
    """Hold back notifications of the alerts that match, from ``starts_at`` to ``ends_at``."""

    matchers: list[str] | dict[str, str] = Field(min_length=1, description="Label matchers; all must match.")
    starts_at: datetime = Field(description="When the silence starts (ISO 8601 with a zone).")
    ends_at: datetime = Field(description="When it ends.")
    comment: str = Field(default="", description="Why, for people.")
    created_by: str = Field(default="config", description="Who asked for it.")

    @field_validator("matchers")
    @classmethod
    def _matchers(cls, v: list[str] | dict[str, str]) -> list[str] | dict[str, str]:
        parse_matchers(v)
        return v

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _zone(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("give a time zone (e.g. 2026-03-02T08:00:00Z)")
        return v.astimezone(UTC)

    @model_validator(mode="after")
    def _order(self) -> SilenceSpec:
        if self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")
        return self

    def silence_id(self) -> str:
        """Return a stable id (the same spec gives the same id on every start)."""
        body = json.dumps(
            [self.matchers, self.starts_at.isoformat(), self.ends_at.isoformat()], sort_keys=True
        )
        return "cfg-" + hashlib.sha256(body.encode()).hexdigest()[:16]


# ---- platform alerts ----------------------------------------------------------------------------


class LevelThresholds(_Model):
    """A warn and a crit threshold (either may be left out)."""

    warn: float | None = Field(default=None, ge=0, description="WARN above this.")
    crit: float | None = Field(default=None, ge=0, description="CRIT above this.")


class BadRecordRate(LevelThresholds):
    """The share of records that did not decode, between two checks."""

    warn: float | None = Field(default=0.01, ge=0, le=1, description="WARN above this share (0.01 = 1%).")
    crit: float | None = Field(default=0.05, ge=0, le=1, description="CRIT above this share.")
    min_records: int = Field(
        default=100, ge=1, description="Judge only when at least this many records arrived."
    )


class RestartLoop(_Model):
    """A dagger restarted too often."""

    restarts: int = Field(default=3, ge=1, description="CRIT at this many restarts …")
    within: Duration = Field(default=900.0, description="… within this time.")


class PlatformDagger(_Model):
    """A dagger the platform watches."""

    spec: str = Field(description="The dagger's spec file (relative to this config file).")
    team: str | None = Field(
        default=None, description="The team alerts about it go to (default: platform.team)."
    )


class PlatformSpec(_Model):
    """Alerts that need no rule: a dagger down or in a restart loop, consumer lag, bad records, sink failures."""

    enabled: bool = Field(default=True, description="Evaluate platform alerts.")
    every: Duration = Field(default=30.0, description="How often the daggers' health is checked.")
    for_: Duration = Field(default=0.0, alias="for", description="Pending period of every platform alert.")
    team: str = Field(default="platform", description="The team of daggers that name none.")
    state_dir: str | None = Field(
        default=None, description="The daggers' state dir (default: $DAGGERS_HOME or ./.daggers)."
    )
    daggers: list[str | PlatformDagger] = Field(
        default_factory=list, description="The daggers to watch (spec files)."
    )
    registry: str | None = Field(
        default=None,
        description="Watch every dagger of this control-plane registry (URL) instead of spec files, "
        "judged by the health model: adds the crash-looping, stalled, lagging and "
        "controller-silent alerts.",
    )
    registry_user: str = Field(default="root", description="The registry user the daggers are read as.")
    down_after: Duration = Field(
        default=600.0,
        description="A dagger that reported no progress for this long (or reports failed) is down.",
    )
    restart_loop: RestartLoop | None = Field(
        default_factory=RestartLoop, description="Restart-loop alert (null: off)."
    )
    consumer_lag: LevelThresholds | None = Field(
        default_factory=lambda: LevelThresholds(warn=100_000, crit=1_000_000),
        description="Records behind the end of the topics (null: off).",
    )
    bad_record_rate: BadRecordRate | None = Field(
        default_factory=BadRecordRate, description="Bad-record alert (null: off)."
    )
    sink_failures: bool = Field(
        default=True, description="CRIT when a sink write failed, WARN when writes were retried."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on platform alerts.")

    def dagger_entries(self) -> list[PlatformDagger]:
        """Return every watched dagger as a PlatformDagger."""
        return [d if isinstance(d, PlatformDagger) else PlatformDagger(spec=d) for d in self.daggers]


# ---- the whole configuration --------------------------------------------------------------------


class AlertsConfig(_Model):
    """Everything ``daggers alerts`` needs."""

    influx: InfluxSpec = Field(default_factory=InfluxSpec, description="The InfluxDB rules query.")
    store: StoreSpec = Field(
        default_factory=StoreSpec, description="Where state, history and the outbox live."
    )
    delivery: DeliverySpec = Field(default_factory=DeliverySpec, description="Retries and back-off.")
    channels: dict[str, Channel] = Field(default_factory=dict, description="Named notification channels.")
    routes: list[RouteSpec] = Field(default_factory=list, description="Which alerts go to which channels.")
    default_channels: list[str] = Field(
        default_factory=list, description="Channels for alerts that no route matches."
    )
    silences: list[SilenceSpec] = Field(default_factory=list, description="Silences kept in the file.")
    platform: PlatformSpec | None = Field(default=None, description="Platform alerts (no rule needed).")
    rules: list[Rule] = Field(default_factory=list, description="Rules defined in this file.")
    rule_files: list[str] = Field(
        default_factory=list,
        description="More rule files (globs, relative to this file), each a list of rules "
        "or a mapping with rules:.",
    )

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not CHANNEL_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a channel name (letters, digits, - _ .)")
        return v

    @property
    def base_dir(self) -> Path:
        """The folder relative paths in the file are resolved against (the config file's)."""
        return self._base_dir

    def rule(self, name: str) -> ThresholdRule | DeadmanRule:
        """Return the rule called ``name``.

        Raises:
            AlertConfigError: there is none (naming the rules there are).
        """
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise AlertConfigError(
            f"no rule named {name!r}; rules: {', '.join(r.name for r in self.rules) or '(none)'}"
        )

    def store_url(self, state_dir: Path) -> str:
        """Return the store's SQLAlchemy URL (default ``sqlite:///<state_dir>/alerts.db``)."""
        if self.store.url is not None:
            return self.store.url.get_secret_value()
        return f"sqlite:///{(state_dir / 'alerts.db').absolute()}"

    def platform_state_dir(self, default: Path) -> Path:
        """Return the daggers' state dir for platform alerts."""
        if self.platform is None or not self.platform.state_dir:
            return default
        return self.resolve(self.platform.state_dir)

    def resolve(self, path: str) -> Path:
        """Return ``path`` resolved against the config file's folder."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self._base_dir / p


def _reference_errors(config: AlertsConfig, node: yaml.Node | None, source: str) -> list[str]:
    """Return located errors for routes or default channels naming unknown channels."""
    known = ", ".join(config.channels) or "(none)"
    errors = []

    def where(*loc: Any) -> str:
        target = _node_at(node, loc)
        return f"{source}:{target.start_mark.line + 1}" if target is not None else source

    for i, route in enumerate(config.routes):
        for j, ch in enumerate(route.channels):
            if ch not in config.channels:
                errors.append(
                    f"{where('routes', i, 'channels', j)}: routes[{i}].channels: no channel named "
                    f"{ch!r}; channels: {known}"
                )
    for j, ch in enumerate(config.default_channels):
        if ch not in config.channels:
            errors.append(
                f"{where('default_channels', j)}: default_channels: no channel named {ch!r}; "
                f"channels: {known}"
            )
    return errors


# ---- loading with line numbers ------------------------------------------------------------------

_SKIP_LOC = {"threshold", "deadman", *CHANNEL_TYPES}


def _node_at(node: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """Return the deepest YAML node along ``loc`` that exists."""
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
    return node


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(k for k in loc if not (isinstance(k, str) and (k in _SKIP_LOC or k.startswith("function-"))))


def _path_text(loc: tuple[Any, ...], data: Any) -> str:
    out, cur = "", data
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
            cur = cur[key] if isinstance(cur, list) and 0 <= key < len(cur) else None
            if isinstance(cur, dict) and isinstance(cur.get("name"), str) and out.startswith("rules"):
                out += f" ({cur['name']})"
        else:
            name = "for" if key == "for_" else "continue" if key == "continue_" else str(key)
            out += ("." if out else "") + name
            cur = cur.get(key) if isinstance(cur, dict) else None
    return out or "(config)"


def format_errors(
    err: ValidationError, node: yaml.Node | None, data: Any, source: str, prefix: tuple[Any, ...] = ()
) -> str:
    """Return one ``source:LINE: field.path: message`` line per problem in ``err``."""
    lines = []
    for e in err.errors():
        loc = _clean_loc(tuple(e["loc"]))
        target = _node_at(node, loc)
        where = f"{source}:{target.start_mark.line + 1}" if target is not None else source
        lines.append(f"{where}: {_path_text(prefix + loc, data)}: {problem(e, written=written_as(target))}")
    return "\n".join(lines)


def _load_yaml(text: str, source: str, env: dict[str, str] | None) -> tuple[Any, yaml.Node | None]:
    from job.spec import interpolate_env

    try:
        text = interpolate_env(text, env, source)
    except SpecError as exc:
        raise AlertConfigError(exc.message) from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise AlertConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None


def parse_config(
    text: str, source: str = "alerts.yaml", env: dict[str, str] | None = None, base_dir: Path | None = None
) -> AlertsConfig:
    """Parse and validate a configuration (and the rule files it names, relative to ``base_dir``).

    ``${VAR}`` / ``${VAR:-default}`` are replaced from ``env`` (default: the process environment).

    Returns:
        The validated configuration, with every rule of its rule files in ``rules``.

    Raises:
        AlertConfigError: bad YAML, a bad value (``file:line: field: message``), a missing rule file,
            two rules with one name, or a route naming an unknown channel.
    """
    data, node = _load_yaml(text, source, env)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AlertConfigError(
            f"{source}: the alerting configuration is a YAML mapping (influx, channels, routes, rules)"
        )
    base = base_dir or Path.cwd()
    try:
        config = AlertsConfig.model_validate(data)
    except ValidationError as exc:
        raise AlertConfigError(format_errors(exc, node, data, source)) from None
    config._base_dir = base
    errors = _reference_errors(config, node, source)
    if errors:
        raise AlertConfigError("\n".join(errors))
    origin = {rule.name: source for rule in config.rules}
    if len(origin) != len(config.rules):
        raise AlertConfigError(f"{source}: rules: two rules have one name ({_duplicates(config.rules)})")
    for pattern in config.rule_files:
        full = pattern if Path(pattern).is_absolute() else str(base / pattern)
        paths = sorted(glob.glob(full))
        if not paths:
            raise AlertConfigError(f"{source}: rule_files: nothing matches {pattern!r} (relative to {base})")
        for path in paths:
            for rule in load_rule_file(Path(path), env):
                if rule.name in origin:
                    raise AlertConfigError(
                        f"{path}: rule {rule.name!r} is also defined in {origin[rule.name]}"
                    )
                origin[rule.name] = path
                config.rules.append(rule)
    return config


def _duplicates(rules: list[ThresholdRule | DeadmanRule]) -> str:
    names = [r.name for r in rules]
    return ", ".join(sorted({n for n in names if names.count(n) > 1}))


def load_config(path: str | Path, env: dict[str, str] | None = None) -> AlertsConfig:
    """Read and validate a configuration file; relative paths in it are relative to its folder.

    Raises:
        AlertConfigError: the file is missing or invalid (see :func:`parse_config`).
    """
    p = Path(path)
    if not p.is_file():
        raise AlertConfigError(
            f"no alerting configuration at {p}", hint="pass --config, or see examples/alerts/alerting.yaml"
        )
    return parse_config(p.read_text(), source=str(p), env=env, base_dir=p.parent.absolute())


class _RuleList(BaseModel):
    rules: list[Rule]


def load_rule_file(path: Path, env: dict[str, str] | None = None) -> list[ThresholdRule | DeadmanRule]:
    """Return the rules of a rule file: a YAML list of rules, or a mapping with ``rules:``.

    Raises:
        AlertConfigError: the file cannot be read or a rule is invalid (``file:line: rules[i] (name).field``).
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise AlertConfigError(f"cannot read rule file {path}: {exc.strerror}") from None
    data, node = _load_yaml(text, str(path), env)
    if isinstance(data, dict) and set(data) == {"rules"}:
        items, node = data["rules"], _node_at(node, ("rules",))
    elif isinstance(data, list):
        items = data
    else:
        raise AlertConfigError(f"{path}: a rule file is a list of rules, or a mapping with rules:")
    try:
        return list(_RuleList.model_validate({"rules": items}).rules)
    except ValidationError as exc:
        wrapped = (
            yaml.MappingNode(
                "tag:yaml.org,2002:map", [(yaml.ScalarNode("tag:yaml.org,2002:str", "rules"), node)]
            )
            if node is not None
            else None
        )
        raise AlertConfigError(format_errors(exc, wrapped, {"rules": items}, str(path))) from None
