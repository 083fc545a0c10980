"""Issue 6's must-show on threshold alerts, against the REAL InfluxDB holding what a REAL dagger wrote, and
local HTTP (webhook, Slack, PagerDuty) and SMTP receivers:

* a threshold crossing produces exactly one trigger and one resolve on every channel (and a pending
  period delays the trigger by exactly that much);
* a silence holds an alert back (and what still fires when it ends is sent then, once);
* a receiver down for 20 seconds still gets every notification, once and in order, after it comes back;
* a restart of the engine mid-incident sends nothing twice.

The rules are evaluated for minutes T0+1m … T0+10m of the dagger's event time (each evaluation reads
the window that ended then), so the values are exact; deliveries happen in real time.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from alerting.engine import AlertEngine
from alerting.matchers import parse_matchers
from alerting.state import Level
from alerting.store import Silence
from tests.alerting.alert_data import SHAPE, T0, DaggerOutput, at_minute, city_id
from tests.alerting.alert_receivers import HttpReceiver, SmtpReceiver
from tests.alerting.alert_setup import (
    PD_ROUTING_KEY,
    SECRETS,
    SLACK_SECRET,
    WEBHOOK_SECRET,
    channels_yaml,
    config_for,
    engine_for,
)
from tests.helpers import wait_until

pytestmark = pytest.mark.integration

JAKARTA, BANDUNG, SURABAYA, MEDAN = (city_id(c) for c in ("Jakarta", "Bandung", "Surabaya", "Medan"))

SPIKE_RULE = """
  - name: {name}
    team: bookings
    measurement: bookings_per_city
    field: bookings
    aggregate: sum
    group_by: [tag_city_id]
    window: 1m
    every: 1h
    for: {pending}
    crit: {{above: {above}}}
    message: "bookings in city {{tag_city_id}}: {{bookings:.0f}} ({{condition}})"
"""


def spike(name: str, above: int, pending: str = "0s") -> str:
    return SPIKE_RULE.format(name=name, above=above, pending=pending)


def webhook_events(http: HttpReceiver, rule: str | None = None) -> list[tuple[str, str, str, float, str]]:
    """(rule, status, city, value, at) of every webhook delivery, in arrival order."""
    out = []
    for r in http.posts(WEBHOOK_SECRET):
        body = r.json
        if rule is None or body["rule"] == rule:
            out.append((body["rule"], body["status"], body["tags"]["tag_city_id"], body["value"], body["at"]))
    return out


def iso(k: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_minute(k)))


def evaluate_minutes(engine: AlertEngine, rules: list[str], minutes: range) -> None:
    for k in minutes:
        for rule in rules:
            engine.evaluate_rule(rule, at_minute(k))


def test_threshold_crossing_sends_one_trigger_and_one_resolve(
    bookings_output: DaggerOutput, tmp_path: Path, http_receiver: HttpReceiver, smtp_receiver: SmtpReceiver
) -> None:
    http, smtp = http_receiver.up(), smtp_receiver.up()
    config = config_for(
        bookings_output,
        tmp_path,
        f"""
routes:
  - matchers: [rule=jakarta-spike]
    channels: [webhook, slack, pagerduty, email]
  - matchers: [rule=jakarta-spike-pending]
    channels: [webhook]
rules:{spike("jakarta-spike", 75)}{spike("jakarta-spike-pending", 75, "2m")}""",
        channels=channels_yaml(http, smtp),
    )
    engine = engine_for(config, tmp_path)
    try:
        values = {}
        for k in range(1, 11):
            report = engine.evaluate_rule("jakarta-spike", at_minute(k))
            values[k] = {g.tags["tag_city_id"]: g.value for g in report.groups}
            engine.evaluate_rule("jakarta-spike-pending", at_minute(k))
            if k == 5:  # evaluating the same moment again changes nothing and sends nothing
                again = engine.evaluate_rule("jakarta-spike", at_minute(k))
                assert again.notifications == [] and again.queued == 0
        states = {s.rule: s for s in engine.store.states()}
    finally:
        engine.close()

    # the values the rule read are the dagger's counts
    for k in range(1, 11):
        assert values[k] == {city_id(name): counts[k - 1] for name, counts in SHAPE.items()}

    # webhook: one trigger when Jakarta's 80 crossed 75 (T0+4m), one resolve when it fell to 20 (T0+7m);
    # the rule with a 2-minute pending period fires two evaluations later, and resolves at once
    assert webhook_events(http, "jakarta-spike") == [
        ("jakarta-spike", "firing", JAKARTA, 80, iso(4)),
        ("jakarta-spike", "resolved", JAKARTA, 20, iso(7)),
    ]
    assert webhook_events(http, "jakarta-spike-pending") == [
        ("jakarta-spike-pending", "firing", JAKARTA, 80, iso(6)),
        ("jakarta-spike-pending", "resolved", JAKARTA, 20, iso(7)),
    ]
    hooks = [r for r in http.posts(WEBHOOK_SECRET) if r.json["rule"] == "jakarta-spike"]
    trigger, resolve = (h.json for h in hooks)
    assert trigger["message"] == "bookings in city 1: 80 (above 75)"
    assert resolve["message"] == "bookings in city 1: 20 (no condition holds)"
    assert (trigger["level"], trigger["previous_level"], resolve["level"], resolve["previous_level"]) == (
        "CRIT",
        "OK",
        "OK",
        "CRIT",
    )
    assert trigger["labels"] == {
        "alertname": "jakarta-spike",
        "rule": "jakarta-spike",
        "team": "bookings",
        "tag_city_id": JAKARTA,
        "severity": "crit",
    }
    assert trigger["started_at"] == resolve["started_at"] == iso(4)
    assert hooks[0].headers["idempotency-key"] == trigger["id"] != resolve["id"]

    # PagerDuty Events API v2: a trigger and a resolve with one dedup_key
    pd = [r.json for r in http.posts("/pagerduty")]
    assert [(e["event_action"], e["dedup_key"], e["routing_key"]) for e in pd] == [
        ("trigger", trigger["dedup_key"], PD_ROUTING_KEY),
        ("resolve", trigger["dedup_key"], PD_ROUTING_KEY),
    ]
    assert pd[0]["payload"]["severity"] == "critical"
    assert (
        pd[0]["payload"]["summary"] == "[CRIT] jakarta-spike tag_city_id=1: bookings in city 1: 80 (above 75)"
    )
    assert pd[0]["payload"]["group"] == "bookings" and pd[0]["payload"]["custom_details"]["value"] == 80
    assert set(pd[1]) == {"routing_key", "event_action", "dedup_key"}

    # Slack: the same two, coloured
    slack = [r.json for r in http.posts("/slack" + SLACK_SECRET)]
    assert [s["text"] for s in slack] == [
        "[CRIT] jakarta-spike tag_city_id=1: bookings in city 1: 80 (above 75)",
        "[RESOLVED] jakarta-spike tag_city_id=1: bookings in city 1: 20 (no condition holds)",
    ]
    assert [s["attachments"][0]["color"] for s in slack] == ["#d50200", "#2eb886"]

    # e-mail: the same two
    mails = smtp.wait_for(2)
    assert [m["Subject"] for m in mails] == [
        "[CRIT] jakarta-spike tag_city_id=1",
        "[RESOLVED] jakarta-spike tag_city_id=1",
    ]
    assert mails[0]["To"] == "oncall@daggers.test" and "value:     80" in mails[0].get_payload()
    assert len(mails) == 2

    # nothing else was sent: Bandung (70), Surabaya (60) and Medan (5) never crossed 75
    assert len(http.posts()) == 2 + 2 + 2 + 2  # webhook ×2 rules, PagerDuty, Slack
    assert states["jakarta-spike"].level == Level.OK and states["jakarta-spike"].notified_level == Level.OK
    assert states["jakarta-spike"].notify_seq == 2


def test_silence_holds_an_alert_back(
    bookings_output: DaggerOutput, tmp_path: Path, http_receiver: HttpReceiver
) -> None:
    http = http_receiver.up()
    t0 = T0.isoformat()
    config = config_for(
        bookings_output,
        tmp_path,
        f"""
default_channels: [webhook]
silences:
  - matchers: [rule=city-spike, tag_city_id={SURABAYA}]
    starts_at: {t0}
    ends_at: {(T0.replace(hour=T0.hour + 1)).isoformat()}
    comment: Surabaya load test
rules:{spike("city-spike", 55)}""",
        channels=channels_yaml(http),
    )
    engine = engine_for(config, tmp_path)
    # a silence added at run time (as `daggers alerts silence add` does): Bandung until T0+5m30s
    engine.store.put_silence(
        Silence(
            id="bandung-maintenance",
            matchers=parse_matchers([f"tag_city_id={BANDUNG}"]),
            starts_at=at_minute(0),
            ends_at=at_minute(5.5),
            comment="maintenance",
        )
    )
    held = {}
    try:
        for k in range(1, 11):
            report = engine.evaluate_rule("city-spike", at_minute(k))
            held[k] = {g.tags["tag_city_id"]: g.held for g in report.groups if g.held}
        firing_at_6 = {s.tags["tag_city_id"]: s.level for s in engine.store.states("city-spike")}
    finally:
        engine.close()

    # Jakarta (80 > 55) is not silenced: trigger at T0+4m, resolve at T0+7m
    # Bandung (70) fires at T0+4m under a silence that ends at T0+5m30s: its trigger goes out at the first
    #   evaluation after that (T0+6m, value 70), its resolve at T0+7m
    # Surabaya (60) fires and resolves entirely within its silence: nothing is ever sent
    assert webhook_events(http) == [
        ("city-spike", "firing", JAKARTA, 80, iso(4)),
        ("city-spike", "firing", BANDUNG, 70, iso(6)),
        ("city-spike", "resolved", JAKARTA, 20, iso(7)),
        ("city-spike", "resolved", BANDUNG, 10, iso(7)),
    ]
    assert held[4] == {BANDUNG: "silenced", SURABAYA: "silenced"}
    assert held[5] == {BANDUNG: "silenced", SURABAYA: "silenced"}
    assert held[6] == {SURABAYA: "silenced"}
    assert all(not held[k] for k in (1, 2, 3, 7, 8, 9, 10))
    assert firing_at_6[SURABAYA] == Level.OK  # it did fire and resolve, silently


OUTAGE_S = 20.0


@pytest.mark.slow
def test_receiver_down_20s_gets_every_notification_once(
    bookings_output: DaggerOutput,
    tmp_path: Path,
    http_receiver: HttpReceiver,
    smtp_receiver: SmtpReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = config_for(
        bookings_output,
        tmp_path,
        f"""
default_channels: [webhook, slack, pagerduty, email]
rules:{spike("jakarta-spike", 75)}""",
        channels=channels_yaml(http_receiver, smtp_receiver),
    )
    engine = engine_for(config, tmp_path)
    try:
        # both receivers are down: the trigger (T0+4m) and the resolve (T0+7m) are queued for 4 channels
        evaluate_minutes(engine, ["jakarta-spike"], range(1, 11))
        queued = engine.store.outbox(status="pending")
        assert [(q.channel, q.payload["status"]) for q in queued] == [
            ("webhook", "firing"),
            ("slack", "firing"),
            ("pagerduty", "firing"),
            ("email", "firing"),
            ("webhook", "resolved"),
            ("slack", "resolved"),
            ("pagerduty", "resolved"),
            ("email", "resolved"),
        ]
        down_since = time.monotonic()
        engine.start()  # its dispatch job tries the outbox every second (the rule's job runs hourly)
        time.sleep(OUTAGE_S)  # a real outage, past the longest back-off (8 s) twice
        during = {q.key: q for q in engine.store.outbox()}
        seen_at = time.time()
        assert all(q.status == "pending" for q in during.values())
        triggers = [q for q in during.values() if q.payload["status"] == "firing"]
        # back-off 1, 2, 4, 8, 8, … s: about 5 tries of each trigger in 20 s (at 0, 1, 3, 7, 15 s), never the
        # resolves (they wait behind their trigger), and far from one try per second (20)
        assert all(3 <= q.attempts <= 8 for q in triggers), [q.attempts for q in triggers]
        assert all(q.attempts == 0 for q in during.values() if q.payload["status"] == "resolved")
        assert all(q.last_error for q in triggers)
        # the back-off stops growing at 8 s: no trigger waits longer than that for its next try
        assert all(q.next_attempt_at <= seen_at + 8.0 for q in triggers), [
            q.next_attempt_at - seen_at for q in triggers
        ]
        http_receiver.up()
        smtp_receiver.up()
        up_at = time.monotonic()
        http_receiver.wait_for(6, timeout=30)
        smtp_receiver.wait_for(2, timeout=30)
        delivered_after = time.monotonic() - up_at  # (for the -s output: how long is the machine's)
        time.sleep(5.0)  # a few more dispatch rounds: nothing is sent again
    finally:
        outbox = engine.store.outbox()
        engine.close()

    assert time.monotonic() - down_since >= OUTAGE_S
    print(f"delivered {delivered_after:.1f} s after the receivers came back (the longest back-off is 8 s)")
    assert webhook_events(http_receiver) == [
        ("jakarta-spike", "firing", JAKARTA, 80, iso(4)),
        ("jakarta-spike", "resolved", JAKARTA, 20, iso(7)),
    ]
    assert [r.json["event_action"] for r in http_receiver.posts("/pagerduty")] == ["trigger", "resolve"]
    assert [r.json["text"][:10] for r in http_receiver.posts("/slack")] == ["[CRIT] jak", "[RESOLVED]"]
    assert [m["Subject"] for m in smtp_receiver.mails()] == [
        "[CRIT] jakarta-spike tag_city_id=1",
        "[RESOLVED] jakarta-spike tag_city_id=1",
    ]
    assert [q.status for q in outbox] == ["sent"] * 8
    # no secret in the logs (urllib3 logs request lines at DEBUG), nor in the errors kept in the store
    text = caplog.text + " ".join(q.last_error or "" for q in during.values())
    assert "not delivered" in caplog.text and "cannot connect to http://127.0.0.1" in caplog.text
    for secret in SECRETS:
        assert secret not in text


def test_engine_restart_mid_incident_sends_nothing_twice(
    bookings_output: DaggerOutput, tmp_path: Path, http_receiver: HttpReceiver, smtp_receiver: SmtpReceiver
) -> None:
    http_receiver.up()  # the mail server stays down until after the restart
    config = config_for(
        bookings_output,
        tmp_path,
        f"""
default_channels: [webhook, email]
rules:{spike("jakarta-spike", 75)}""",
        channels=channels_yaml(http_receiver, smtp_receiver),
    )
    first = engine_for(config, tmp_path)
    try:
        first.start()  # the scheduler, its job store and the lease, as `daggers alerts run` has them
        evaluate_minutes(first, ["jakarta-spike"], range(1, 6))  # Jakarta fires at T0+4m
        http_receiver.wait_for(1)
        # the receiver has the webhook before the engine has its answer and records it as sent
        wait_until(
            "the webhook recorded as sent, only the mail pending",
            lambda: [q.channel for q in first.store.outbox(status="pending")] == ["email"],
            30,
            every_s=0.1,
        )
    finally:
        first.close()  # stops mid-incident: CRIT, the mail still queued

    second = engine_for(config, tmp_path)
    try:
        second.start()  # takes the lease the first engine gave up; keeps the scheduled jobs
        assert {s.rule: s.level for s in second.store.states()} == {"jakarta-spike": Level.CRIT}
        smtp_receiver.up()
        smtp_receiver.wait_for(1, timeout=15)  # the queued trigger mail, delivered by the new engine
        evaluate_minutes(second, ["jakarta-spike"], range(5, 11))  # still CRIT at 5 and 6, resolves at 7
        http_receiver.wait_for(2)
        smtp_receiver.wait_for(2, timeout=15)
        time.sleep(3.0)
        jobs = sorted(job.id for job in second._scheduler.get_jobs())
    finally:
        second.close()

    assert jobs == ["dispatch", "housekeeping", "rule:jakarta-spike"]
    assert webhook_events(http_receiver) == [
        ("jakarta-spike", "firing", JAKARTA, 80, iso(4)),
        ("jakarta-spike", "resolved", JAKARTA, 20, iso(7)),
    ]
    assert [m["Subject"] for m in smtp_receiver.mails()] == [
        "[CRIT] jakarta-spike tag_city_id=1",
        "[RESOLVED] jakarta-spike tag_city_id=1",
    ]
