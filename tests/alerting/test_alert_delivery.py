"""Delivery: the outbox's back-off, order and give-up rules (fake channels, a controlled clock, a real
SQLite store), how each channel maps answers to retry/final (a local HTTP receiver), the exact payloads
(PagerDuty Events v2, Slack, webhook with HMAC, e-mail), and secrets kept out of logs and the store."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path

import pytest

from alerting.config import parse_config
from alerting.errors import DeliveryError
from alerting.notifiers import build_notifiers
from alerting.notifiers.base import Notification, Notifier
from alerting.notifiers.email import email_message
from alerting.notifiers.pagerduty import pagerduty_body
from alerting.notifiers.slack import slack_body
from alerting.outbox import Backoff, Dispatcher
from alerting.secrets import Redactor, public_url
from alerting.store import AlertStore, OutboxItem
from tests.alerting.alert_receivers import HttpReceiver, Received
from tests.helpers import FakeClock

T = 1772445600.0


def notification(seq: int = 1, status: str = "firing", fp: str = "f" * 32) -> Notification:
    level = "CRIT" if status == "firing" else "OK"
    return Notification(
        id=f"{fp}:{seq}",
        rule="spike",
        team="bookings",
        status=status,
        level=level,  # type: ignore[arg-type]
        previous_level="OK" if status == "firing" else "CRIT",
        labels={"team": "bookings", "severity": "crit", "city": "1"},
        tags={"city": "1"},
        value=80.0 if status == "firing" else 20.0,
        condition="above 75",
        message="80 bookings",
        fingerprint=fp,
        dedup_key=f"daggers/spike/{fp[:16]}",
        started_at=T,
        at=T + 60 * seq,
    )


class Flaky(Notifier):
    """Fails with ``errors`` in turn (None: delivered), recording what it delivered."""

    type = "flaky"

    def __init__(self, name: str, errors: list[DeliveryError | None] | None = None) -> None:
        super().__init__(name)
        self.errors = list(errors or [])
        self.delivered: list[str] = []
        self.tries = 0

    def send(self, n: Notification) -> None:
        self.tries += 1
        err = self.errors.pop(0) if self.errors else None
        if err is not None:
            raise err
        self.delivered.append(n.id)

    def secrets(self) -> list[str]:
        return []

    def describe(self) -> str:
        return "flaky"


def queue(store: AlertStore, channel: str, n: Notification, at: float) -> None:
    store.commit_evaluation(
        [],
        [],
        [
            OutboxItem(
                key=f"{n.id}:{channel}",
                channel=channel,
                fingerprint=n.fingerprint,
                rule=n.rule,
                payload=n.model_dump(mode="json"),
                created_at=at,
                next_attempt_at=at,
            )
        ],
    )


def test_backoff_schedule() -> None:
    b = Backoff(initial=5, factor=2, maximum=300, jitter=0)
    assert [b.delay(n) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 300, 300, 300]
    assert Backoff(1, 2, 8, jitter=0.1).delay(3, rng=lambda: 0.5) == pytest.approx(4.2)


def test_outbox_order_retries_and_give_up(tmp_path: Path) -> None:
    store, clock = AlertStore(f"sqlite:///{tmp_path}/a.db"), FakeClock(T)
    down = DeliveryError("down", retryable=True)
    hook = Flaky("hook", [down, down, None])
    mail = Flaky("mail")
    pd = Flaky("pd", [DeliveryError("slow down", retryable=True, retry_after=30.0)])
    bad = Flaky("bad", [DeliveryError("HTTP 404", retryable=False)])
    dispatcher = Dispatcher(
        store,
        {"hook": hook, "mail": mail, "pd": pd, "bad": bad},
        backoff=Backoff(1, 2, 8, jitter=0),
        give_up_after=3600,
        clock=clock,
    )
    trigger, resolve = notification(1), notification(2, "resolved")
    for ch in ("hook", "mail", "pd", "bad"):
        queue(store, ch, trigger, T)
    for ch in ("hook", "mail"):
        queue(store, ch, resolve, T)
    report = dispatcher.dispatch()
    # mail is up: both go; hook is down: its resolve waits behind its trigger; pd asked for 30 s; bad is final
    assert (report.sent, report.retried, report.failed, report.waiting) == (2, 2, 1, 1)
    assert mail.delivered == [trigger.id, resolve.id] and hook.delivered == []
    clock.now = T + 0.5
    assert dispatcher.dispatch().waiting == 3 and hook.tries == 1  # not due yet: nobody is tried
    clock.now = T + 1
    dispatcher.dispatch()  # hook's second try fails: next in 2 s
    clock.now = T + 3
    dispatcher.dispatch()  # third try succeeds, and the resolve follows in the same round
    assert hook.delivered == [trigger.id, resolve.id] and hook.tries == 4
    assert pd.delivered == []
    clock.now = T + 30
    dispatcher.dispatch()
    assert pd.delivered == [trigger.id]
    status = {(i.channel, i.payload["status"]): (i.status, i.attempts) for i in store.outbox()}
    assert status == {
        ("hook", "firing"): ("sent", 3),
        ("hook", "resolved"): ("sent", 1),
        ("mail", "firing"): ("sent", 1),
        ("mail", "resolved"): ("sent", 1),
        ("pd", "firing"): ("sent", 2),
        ("bad", "firing"): ("failed", 1),
    }
    assert [e.event for e in store.history()].count("delivery_failed") == 1

    # give up after give_up_after: a channel down for good loses nothing silently
    forever = Flaky("forever", [down] * 100)
    dispatcher = Dispatcher(
        store, {"forever": forever}, backoff=Backoff(1, 2, 8, jitter=0), give_up_after=60, clock=clock
    )
    queue(store, "forever", notification(3), clock.now)
    for _ in range(40):
        clock.now += 8
        dispatcher.dispatch()
    item = store.outbox(status="failed")[-1]
    assert item.channel == "forever" and item.last_error.startswith("gave up after") and forever.tries < 12
    store.close()


def test_channels_map_answers_to_retry_or_final() -> None:
    answers: dict[str, tuple[int, bytes, dict[str, str]]] = {}

    def respond(got: Received) -> tuple[int, bytes, dict[str, str]]:
        return answers.get(got.path.split("/")[1], (200, b"ok", {}))

    http = HttpReceiver(respond).up()
    try:
        config = parse_config(f"""channels:
  hook: {{type: webhook, url: "{http.url("/hook/x")}"}}
  slack: {{type: slack, url: "{http.url("/slack/x")}"}}
  pd: {{type: pagerduty, routing_key: key-123, url: "{http.url("/pd")}"}}
""")
        notifiers = build_notifiers(config)
        cases = [
            ("hook", 500, True, None),
            ("hook", 429, True, 7.0),
            ("hook", 404, False, None),
            ("slack", 400, False, None),
            ("slack", 503, True, 7.0),
            ("pd", 400, False, None),
            ("pd", 429, True, 7.0),
        ]
        for channel, status, retryable, after in cases:
            answers[channel] = (status, b"nope", {"Retry-After": "7"} if after else {})
            with pytest.raises(DeliveryError) as exc:
                notifiers[channel].send(notification())
            assert (exc.value.retryable, exc.value.retry_after) == (retryable, after)
            assert f"HTTP {status}: nope" in exc.value.message
        answers.clear()
        for n in notifiers.values():
            n.send(notification())
        assert [r.path for r in http.posts()] == ["/hook/x", "/slack/x", "/pd"]
    finally:
        http.close()


def test_payloads() -> None:
    n, r = notification(1), notification(2, "resolved")
    assert pagerduty_body(n, "KEY") == {
        "routing_key": "KEY",
        "event_action": "trigger",
        "dedup_key": "daggers/spike/ffffffffffffffff",
        "client": "Daggers alerts",
        "payload": {
            "summary": "[CRIT] spike city=1: 80 bookings",
            "source": "daggers",
            "severity": "critical",
            "timestamp": "2026-03-02T10:01:00Z",
            "component": "spike",
            "group": "bookings",
            "class": "spike",
            "custom_details": {
                "value": 80.0,
                "condition": "above 75",
                "labels": n.labels,
                "previous_level": "OK",
                "started_at": "2026-03-02T10:00:00Z",
                "notification_id": n.id,
            },
        },
    }
    assert pagerduty_body(r, "KEY") == {
        "routing_key": "KEY",
        "event_action": "resolve",
        "dedup_key": "daggers/spike/ffffffffffffffff",
    }
    slack = slack_body(n)
    assert slack["text"] == "[CRIT] spike city=1: 80 bookings"
    assert [f["title"] for f in slack["attachments"][0]["fields"]] == [
        "level",
        "team",
        "value",
        "condition",
        "city",
    ]
    config = parse_config("""channels:
  mail: {type: email, host: smtp.example.com, sender: a@example.com, to: [b@example.com, c@example.com]}
""")
    mail = email_message(r, config.channels["mail"])  # type: ignore[arg-type]
    assert (mail["Subject"], mail["To"], mail["Message-ID"]) == (
        "[RESOLVED] spike city=1",
        "b@example.com, c@example.com",
        f"<{'f' * 32}.2@daggers.alerts>",
    )
    assert "level:     CRIT -> OK" in mail.get_content()


def test_webhook_signature_and_idempotency_key() -> None:
    http = HttpReceiver().up()
    try:
        config = parse_config(f"""channels:
  hook: {{type: webhook, url: "{http.url("/hook")}", hmac_secret: s3cret, headers: {{X-Team: bookings}}}}
""")
        build_notifiers(config)["hook"].send(notification())
        got = http.posts()[0]
        assert (
            got.headers["x-daggers-signature"]
            == "sha256=" + hmac.new(b"s3cret", got.body, hashlib.sha256).hexdigest()
        )
        assert got.headers["idempotency-key"] == "f" * 32 + ":1" and got.headers["x-team"] == "bookings"
        body = json.loads(got.body)
        assert body["version"] == "1" and body["at"] == "2026-03-02T10:01:00Z" and body["status"] == "firing"
    finally:
        http.close()


def test_secrets_stay_out_of_logs_and_the_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret_path = "/services/T0/B0/VerySecretToken42"

    def echo(got: Received) -> tuple[int, bytes]:  # a receiver that echoes the URL in its error
        return 500, f"cannot post to http://127.0.0.1{got.path}".encode()

    http = HttpReceiver(echo).up()
    down = HttpReceiver()  # never listens
    try:
        config = parse_config(f"""channels:
  echoing: {{type: slack, url: "{http.url(secret_path)}"}}
  down: {{type: webhook, url: "{down.url("/hook?token=QueryToken77")}"}}
  pd: {{type: pagerduty, routing_key: PdRoutingKey99, url: "{down.url("/pd")}"}}
""")
        notifiers = build_notifiers(config)
        redact = Redactor([s for n in notifiers.values() for s in n.secrets()])
        from alerting import secrets

        installed = secrets.install(redact)
        store = AlertStore(f"sqlite:///{tmp_path}/a.db")
        dispatcher = Dispatcher(store, notifiers, backoff=Backoff(1, 2, 8, jitter=0), redact=redact)
        for ch in notifiers:
            queue(store, ch, notification(), T)
        dispatcher.dispatch()
        logging.getLogger("urllib3.connectionpool").debug(
            'http://127.0.0.1 "POST %s HTTP/1.1" 500', secret_path
        )
        secrets.uninstall(installed)
        errors = " ".join(i.last_error or "" for i in store.outbox())
        store.close()
    finally:
        http.close()
        down.close()
    assert "answered HTTP 500" in errors and "cannot connect to http://127.0.0.1" in errors
    text = caplog.text + errors + " ".join(n.describe() + repr(n) for n in notifiers.values())
    for secret in ("VerySecretToken42", secret_path, "QueryToken77", "PdRoutingKey99"):
        assert secret not in text
    assert "***" in caplog.text  # the echoed URL and the urllib3 request line were masked
    assert public_url("https://user:pw@hooks.slack.com:8443/services/x?y=1") == "https://hooks.slack.com:8443"


def test_prune_keeps_what_is_still_queued(tmp_path: Path) -> None:
    from alerting.store import HistoryEvent

    store = AlertStore(f"sqlite:///{tmp_path}/a.db")
    queue(store, "hook", notification(1), T - 100)
    queue(store, "hook", notification(2, "resolved"), T - 100)
    queue(store, "hook", notification(3), T + 100)
    first = store.outbox()[0]
    assert first.id is not None
    store.mark_sent(first.id, T - 90, 1)
    store.add_history(
        [
            HistoryEvent(T - 100, "f" * 32, "spike", "state", 0, 2),
            HistoryEvent(T + 5, "f" * 32, "spike", "state", 2, 0),
        ]
    )
    assert store.prune(before=T) == 2  # the old delivered item and the old history line
    assert [(i.payload["id"][-1], i.status) for i in store.outbox()] == [("2", "pending"), ("3", "pending")]
    assert [e.at for e in store.history()] == [T + 5]
    store.close()
