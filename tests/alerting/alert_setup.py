"""Building alert engines for the tests: a configuration over the session dagger's output, with channels
pointing at local receivers and a SQLite store in the test's folder."""

from __future__ import annotations

import re
import textwrap
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from alerting.config import AlertsConfig, parse_config
from alerting.engine import AlertEngine
from alerting.influxql import GroupValue
from alerting.notifiers.base import Notification, Notifier
from tests.alerting.alert_data import DaggerOutput
from tests.alerting.alert_receivers import HttpReceiver, SmtpReceiver

#: secrets the tests put in channel settings and then look for in logs, errors and the store
WEBHOOK_SECRET = "/hook/T0ps3cr3t-webhook-path-4d2c"
SLACK_SECRET = "/services/T000SECRET/B000SECRET/xoxSlackToken99"
PD_ROUTING_KEY = "R0utingKeySecret0123456789abcdef"
SECRETS = (WEBHOOK_SECRET, SLACK_SECRET, PD_ROUTING_KEY, "T0ps3cr3t", "xoxSlackToken99", "R0utingKeySecret")

FAST_DELIVERY = """delivery:
  dispatch_interval: 1s
  backoff_initial: 1s
  backoff_factor: 2
  backoff_max: 8s
  backoff_jitter: 0
  give_up_after: 1h
  timeout: 5s
"""


def channels_yaml(http: HttpReceiver | None = None, smtp: SmtpReceiver | None = None) -> str:
    """Channels ``webhook``, ``slack``, ``pagerduty`` (on ``http``) and ``email`` (on ``smtp``)."""
    out = "channels:\n"
    if http is not None:
        out += f"""  webhook:
    type: webhook
    url: "{http.url(WEBHOOK_SECRET)}"
  slack:
    type: slack
    url: "{http.url("/slack" + SLACK_SECRET)}"
  pagerduty:
    type: pagerduty
    url: "{http.url("/pagerduty/v2/enqueue")}"
    routing_key: "{PD_ROUTING_KEY}"
"""
    if smtp is not None:
        out += f"""  email:
    type: email
    host: 127.0.0.1
    port: {smtp.port}
    sender: alerts@daggers.test
    to: [oncall@daggers.test]
"""
    return out


def config_for(
    output: DaggerOutput, tmp_path: Path, body: str, *, channels: str = "", delivery: str = FAST_DELIVERY
) -> AlertsConfig:
    """Return a configuration reading the dagger's database, storing in ``tmp_path/alerts.db``."""
    text = f"""influx:
  url: {output.influx_url}
  database: {output.database}
store:
  url: sqlite:///{tmp_path / "alerts.db"}
{delivery}{channels}{textwrap.dedent(body)}"""
    (tmp_path / "alerts.yaml").write_text(text)
    return parse_config(text, str(tmp_path / "alerts.yaml"), base_dir=tmp_path)


def engine_for(config: AlertsConfig, tmp_path: Path, clock: Callable[[], float] = time.time) -> AlertEngine:
    """Return an engine on ``config`` (state dir ``tmp_path``)."""
    return AlertEngine(config, state_dir=tmp_path, clock=clock)


class FakeReader:
    """Answers each query from ``data``: {epoch seconds of a point: {group tag value: value}}, summing or
    counting the points inside the query's time range (like sum()/count() would)."""

    def __init__(self, tag: str = "city") -> None:
        self.tag = tag
        self.data: dict[float, dict[str, float]] = {}
        self.queries: list[str] = []

    def query(self, q: str, database: str | None = None) -> list[GroupValue]:
        self.queries.append(q)
        start, end = (
            datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
            for t in re.findall(r"'(\d{4}-[^']+)'", q)
        )
        sums: dict[str, float] = {}
        counting = "count(" in q
        for at, groups in self.data.items():
            if start < at <= end:
                for g, v in groups.items():
                    sums[g] = sums.get(g, 0.0) + (1.0 if counting else v)
        grouped = "GROUP BY" in q
        if not grouped:
            return [GroupValue({}, sum(sums.values()), 0, {"count": sum(sums.values())})] if sums else []
        return [GroupValue({self.tag: g}, v, 0, {"count": v}) for g, v in sorted(sums.items())]

    def close(self) -> None:
        pass


class Recorder(Notifier):
    type = "recorder"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.got: list[Notification] = []

    def send(self, notification: Notification) -> None:
        self.got.append(notification)

    def secrets(self) -> list[str]:
        return []

    def describe(self) -> str:
        return "recorder"


#: Platform alerts from the health model only (the spec-file checks off), sent to one recording channel.
MODEL_ALERTS_YAML = """channels:
  rec: {type: webhook, url: "http://127.0.0.1:9/x"}
default_channels: [rec]
platform:
  registry: unused
  restart_loop: null
  consumer_lag: null
  bad_record_rate: null
  sink_failures: false
"""


def model_alert_engine(plane: Any, state_dir: Path) -> tuple[AlertEngine, Recorder]:
    """Return an alert engine that judges the daggers of ``plane``'s registry by the health model
    (:class:`alerting.health.RegistryHealthSource`), and the recorder of what it sends."""
    from alerting.health import RegistryHealthSource
    from alerting.store import AlertStore

    rec = Recorder("rec")
    engine = AlertEngine(
        parse_config(MODEL_ALERTS_YAML),
        state_dir=state_dir,
        store=AlertStore(f"sqlite:///{state_dir}/alerts.db"),
        reader=FakeReader(),  # type: ignore[arg-type]
        health=RegistryHealthSource(plane),
        notifiers={"rec": rec},
    )
    return engine, rec
