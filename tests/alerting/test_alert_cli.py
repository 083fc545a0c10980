"""``daggers alerts``: check, test RULE (against the REAL dagger output), list, history and silences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from alerting.config import parse_config
from alerting.engine import AlertEngine
from alerting.store import AlertStore
from job.cli.alerts import register
from tests.alerting.alert_data import T0, DaggerOutput, at_minute, city_id
from tests.alerting.alert_setup import WEBHOOK_SECRET, FakeReader, Recorder, config_for

REPO = Path(__file__).resolve().parents[2]
T = 1772445600.0


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli(), ["alerts", *args])
    return result.exit_code, result.output


def test_check(tmp_path: Path) -> None:
    code, out = run("check", "--config", str(REPO / "examples" / "alerts" / "alerting.yaml"))
    assert code == 0
    assert "5 rules, 5 channels, 4 routes, 1 silence, platform alerts on 2 daggers" in out
    assert (
        "bookings-drop-vs-last-week (threshold, team bookings, every 300s): crit change vs D-7 below -60%"
        in out
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rules:\n  - name: x1\n    team: t\n    measurement: m\n    field: f\n    crit: {abov: 3}\n"
    )
    code, out = run("check", "--config", str(bad))
    assert code == 2
    assert out.startswith("Invalid alerting configuration: " + str(bad) + ":6: rules[0] (x1).crit")
    assert "Traceback" not in out
    code, out = run("check", "--config", str(tmp_path / "missing.yaml"))
    assert code == 2 and "no alerting configuration at" in out


def seeded(tmp_path: Path) -> Path:
    """A config whose store holds one CRIT alert (evaluated with a fake reader), and its path."""
    path = tmp_path / "alerts.yaml"
    path.write_text(f"""store: {{url: "sqlite:///{tmp_path}/alerts.db"}}
channels:
  rec: {{type: webhook, url: "http://127.0.0.1:9{WEBHOOK_SECRET}"}}
default_channels: [rec]
rules:
  - {{name: spike, team: t, measurement: m, field: n, aggregate: sum, group_by: [city], window: 1m,
      crit: {{above: 10}}, message: "{{city}} at {{n:.0f}}"}}
""")
    config = parse_config(path.read_text(), str(path), base_dir=tmp_path)
    reader = FakeReader()
    reader.data[T] = {"A": 50, "B": 1}
    engine = AlertEngine(
        config,
        state_dir=tmp_path,
        store=AlertStore(f"sqlite:///{tmp_path}/alerts.db"),
        reader=reader,
        notifiers={"rec": Recorder("rec")},
    )  # type: ignore[arg-type]
    engine.evaluate_rule("spike", T)
    engine.close()
    return path


def test_list_history_and_silences(tmp_path: Path) -> None:
    config = seeded(tmp_path)
    code, out = run("list", "--config", str(config), "--json")
    assert code == 0
    listed = json.loads(out)
    assert [(f["rule"], f["tags"], f["level"], f["value"], f["message"]) for f in listed["firing"]] == [
        ("spike", {"city": "A"}, "CRIT", 50.0, "A at 50")
    ]
    assert listed["queued"] == [] and listed["silences"] == []
    code, out = run("list", "--config", str(config))
    assert code == 0 and "CRIT" in out and "A at 50" in out
    code, out = run("history", "spike", "--config", str(config))
    assert code == 0 and " spike " in out and "state OK→CRIT" in out and "notify OK→CRIT rec" in out

    code, out = run(
        "silence",
        "add",
        "city=A",
        "team=t",
        "--duration",
        "2h",
        "--comment",
        "load test",
        "--config",
        str(config),
    )
    assert code == 0 and "city=A, team=t" in out
    silence_id = out.split()[1]
    code, out = run("silence", "list", "--config", str(config))
    assert code == 0 and f"{silence_id} active" in out and "(load test)" in out
    code, out = run("silence", "expire", silence_id, "--config", str(config))
    assert code == 0
    code, out = run("silence", "list", "--config", str(config))
    assert out.strip() == "no silences"
    code, out = run("silence", "add", "city", "--config", str(config))
    assert code == 2 and "is not a matcher" in out
    code, out = run("silence", "expire", "nope", "--config", str(config))
    assert code == 2 and "no single silence has id 'nope'" in out
    assert WEBHOOK_SECRET not in out


@pytest.mark.integration
def test_test_rule_shows_what_it_would_send(bookings_output: DaggerOutput, tmp_path: Path) -> None:
    config = config_for(
        bookings_output,
        tmp_path,
        """
channels:
  hook: {type: webhook, url: "http://127.0.0.1:9/hook"}
default_channels: [hook]
rules:
  - name: city-spike
    team: bookings
    measurement: bookings_per_city
    field: bookings
    aggregate: sum
    group_by: [tag_city_id]
    window: 1m
    crit: {above: 65}
    message: "city {tag_city_id}: {bookings:.0f}"
""",
    )
    path = tmp_path / "alerts.yaml"
    at = "2026-03-02T10:04:00Z"
    assert at_minute(4) == T0.timestamp() + 240
    code, out = run(
        "test", "city-spike", "--config", str(path), "--at", at, "--state-dir", str(tmp_path), "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    groups = {g["tags"]["tag_city_id"]: g for g in report["groups"]}
    assert {c: (g["value"], g["level"]) for c, g in groups.items()} == {
        city_id("Jakarta"): (80, "CRIT"),
        city_id("Bandung"): (70, "CRIT"),
        city_id("Surabaya"): (60, "OK"),
        city_id("Medan"): (5, "OK"),
    }
    jakarta = groups[city_id("Jakarta")]
    assert jakarta["channels"] == ["hook"] and jakarta["notification"]["message"] == "city 1: 80"
    assert groups[city_id("Surabaya")]["notification"] is None
    assert report["queries"] == [
        'SELECT sum("bookings") AS "value" FROM "'
        + bookings_output.database
        + '".."bookings_per_city" WHERE '
        "time > '2026-03-02T10:03:00Z' AND time <= '2026-03-02T10:04:00Z' GROUP BY \"tag_city_id\""
    ]
    code, out = run("test", "city-spike", "--config", str(path), "--at", at, "--state-dir", str(tmp_path))
    assert code == 0
    assert out.splitlines()[-2:] == [
        "would send [CRIT] city-spike tag_city_id=1 to hook: city 1: 80",
        "would send [CRIT] city-spike tag_city_id=2 to hook: city 2: 70",
    ]
    # nothing was stored or sent
    store = AlertStore(config.store_url(tmp_path))
    assert store.states() == [] and store.outbox() == []
    store.close()
    code, out = run("test", "no-such-rule", "--config", str(path))
    assert code == 2 and "no rule named 'no-such-rule'; rules: city-spike" in out
