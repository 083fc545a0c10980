"""Rules and configuration: YAML validated with errors that name the file, line and field; durations,
conditions, matchers, templates and the built InfluxQL (unit tests, no services)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alerting.config import load_config, parse_config
from alerting.durations import format_duration, parse_duration
from alerting.errors import AlertConfigError
from alerting.influxql import count_query, parse_series, quote_ident, quote_string, threshold_query
from alerting.matchers import parse_matcher, parse_matchers
from alerting.rules import Condition, DeadmanRule, ThresholdRule
from alerting.template import check_template, render

REPO = Path(__file__).resolve().parents[2]
T = 1772445600.0  # 2026-03-02T10:00:00Z


def errors_of(text: str, **kw: object) -> list[str]:
    with pytest.raises(AlertConfigError) as exc:
        parse_config(text, "alerts.yaml", **kw)  # type: ignore[arg-type]
    return exc.value.message.splitlines()


def test_durations() -> None:
    assert [parse_duration(v) for v in ("90s", "5m", "1h30m", "7d", "500ms", 90, "90", "1.5h", "2w")] == [
        90,
        300,
        5400,
        604800,
        0.5,
        90,
        90,
        5400,
        1209600,
    ]
    assert [format_duration(s) for s in (90, 300, 5400, 0.5, 0, 86400 + 61)] == [
        "1m30s",
        "5m",
        "1h30m",
        "500ms",
        "0s",
        "1d1m1s",
    ]
    for bad in ("5x", "m5", "", "-3", True, "5 m", "5mm", None):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_conditions() -> None:
    above, below = Condition(above=10), Condition(below=2)
    outside = Condition(outside=(10, 90))
    change = Condition(versus="d7", below=-50)
    assert (above.holds(10.5), above.holds(10), above.holds(None)) == (True, False, False)
    assert (below.holds(1.9), below.holds(2)) == (True, False)
    assert [outside.holds(v) for v in (9, 10, 50, 90, 91)] == [True, False, False, False, True]
    assert change.versus == "D-7"
    assert change.subject(40, 100) == -60.0 and change.holds(40, 100) and not change.holds(60, 100)
    assert not change.holds(40, None) and not change.holds(40, 0)  # no past value: the change is unknown
    assert [c.describe() for c in (above, below, outside, change)] == [
        "above 10",
        "below 2",
        "outside [10, 90]",
        "change vs D-7 below -50%",
    ]
    with pytest.raises(ValueError, match="exactly one of above, below or outside"):
        Condition(above=1, below=0)
    with pytest.raises(ValueError, match="low < high"):
        Condition(outside=(5, 5))


def test_every_bad_field_is_named_with_its_line() -> None:
    text = """influx:
  url: http://127.0.0.1:8086
channels:
  team-slack:
    type: slack
    url: not-a-url/with/SECRETPATH
  pd:
    type: pagerduty
    routing_key: abc
rules:
  - name: bookings-high
    team: bookings
    measurement: m
    field: f
    crit: {above: lots}
  - name: drop
    team: bookings
    measurement: m
    field: f
    warn: {below: 2, above: 3}
  - name: stops
    kind: deadman
    team: bookings
    measurement: m
    period: 5q
  - name: Bad_Name
    team: x
    measurement: m
    field: f
    crit: {above: 1}
  - name: templ
    team: x
    measurement: m
    field: f
    group_by: [city]
    crit: {above: 1}
    message: "{city} {citty}"
  - name: nokind
    kind: sometimes
"""
    assert errors_of(text) == [
        "alerts.yaml:6: channels.team-slack.url: must be an http:// or https:// URL (the value is a secret and is "
        "not shown)",
        "alerts.yaml:15: rules[0] (bookings-high).crit.above: lots is not a number",
        "alerts.yaml:20: rules[1] (drop).warn: give exactly one of above, below or outside (got above, below)",
        "alerts.yaml:25: rules[2] (stops).period: '5q' is not a duration (e.g. 30s, 5m, 1h30m, 7d)",
        "alerts.yaml:26: rules[3] (Bad_Name).name: 'Bad_Name' must be 2-63 lower-case letters, digits or dashes, "
        "starting with a letter",
        "alerts.yaml:37: rules[4] (templ).message: {citty} is not a field this rule has; use one of: at, change_pct, "
        "city, condition, dagger, f, level, past_value, previous_level, rule, since, status, tags, team, value",
        "alerts.yaml:38: rules[5] (nokind): kind must be threshold or deadman",
    ]


def test_cross_checks_and_rule_files(tmp_path: Path) -> None:
    assert errors_of("""channels:
  a: {type: webhook, url: "http://x/y"}
routes:
  - matchers: [team=x]
    channels: [a, b]
default_channels: [c]
""") == [
        "alerts.yaml:5: routes[0].channels: no channel named 'b'; channels: a",
        "alerts.yaml:6: default_channels: no channel named 'c'; channels: a",
    ]
    assert errors_of(
        "rules:\n  - {name: r1, team: t, measurement: m, field: f, crit: {above: 1}}\n"
        "  - {name: r1, team: t, measurement: m, field: f, crit: {above: 2}}\n"
    ) == ["alerts.yaml: rules: two rules have one name (r1)"]
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "a.yaml").write_text(
        "- {name: r2, team: t, kind: deadman, measurement: m, period: 1m}\n"
    )
    (tmp_path / "rules" / "b.yaml").write_text(
        "rules:\n  - name: r3\n    team: t\n    measurement: m\n    field: f\n    crit: {below: x}\n"
    )
    main = tmp_path / "alerts.yaml"
    main.write_text(
        "rules:\n  - {name: r1, team: t, measurement: m, field: f, crit: {above: 1}}\n"
        "rule_files: [rules/*.yaml]\n"
    )
    with pytest.raises(AlertConfigError) as exc:
        load_config(main)
    assert exc.value.message == (f"{tmp_path}/rules/b.yaml:6: rules[0] (r3).crit.below: x is not a number")
    (tmp_path / "rules" / "b.yaml").write_text(
        "rules:\n  - {name: r1, team: t, measurement: m, field: f, crit: {below: 1}}\n"
    )
    with pytest.raises(AlertConfigError, match="rule 'r1' is also defined in"):
        load_config(main)
    (tmp_path / "rules" / "b.yaml").unlink()
    config = load_config(main)
    assert [r.name for r in config.rules] == ["r1", "r2"]
    assert isinstance(config.rules[1], DeadmanRule) and config.rules[1].period == 60


def test_secrets_come_from_the_environment_and_are_never_shown() -> None:
    text = """channels:
  hook: {type: webhook, url: "${HOOK_URL}", headers: {Authorization: "Bearer ${TOKEN}"}}
  pd: {type: pagerduty, routing_key: "${PD_KEY:-fallback-key}"}
"""
    config = parse_config(text, env={"HOOK_URL": "https://hooks.example.com/T/SECRET1", "TOKEN": "SECRET2"})
    hook = config.channels["hook"]
    assert hook.url.get_secret_value() == "https://hooks.example.com/T/SECRET1"
    assert config.channels["pd"].routing_key.get_secret_value() == "fallback-key"
    shown = repr(config) + str(config) + config.model_dump_json()
    assert "SECRET1" not in shown and "SECRET2" not in shown and "fallback-key" not in shown
    assert errors_of(text, env={}) == [
        "alerts.yaml:2: environment variable HOOK_URL is not set (and has no :-default)"
    ]


def test_the_examples_load() -> None:
    config = load_config(REPO / "examples" / "alerts" / "alerting.yaml")
    assert [r.name for r in config.rules] == [
        "bookings-spike-per-city",
        "bookings-drop-vs-last-week",
        "bookings-output-stopped",
        "drivers-supply-low",
        "drivers-output-stopped",
    ]
    assert config.platform is not None and [d.spec for d in config.platform.dagger_entries()] == [
        "../bookings-per-s2.yaml",
        "../drivers-per-s2.yaml",
    ]
    assert config.resolve("../bookings-per-s2.yaml").resolve() == REPO / "examples" / "bookings-per-s2.yaml"


def test_matchers() -> None:
    labels = {"team": "bookings", "severity": "crit", "city": "Jakarta"}
    cases = {
        "team=bookings": True,
        "team!=bookings": False,
        "city=~Jak.*|Bandung": True,
        "city=~Jak": False,
        "city!~Band.*": True,
        "missing=": True,
        "missing!=": False,
        'team="bookings"': True,
    }
    assert {m: parse_matcher(m).matches(labels) for m in cases} == cases
    assert parse_matchers({"team": "x"})[0].op == "="
    with pytest.raises(ValueError, match="is not a matcher"):
        parse_matcher("team")
    with pytest.raises(ValueError, match="does not compile"):
        parse_matcher("city=~(")


def test_templates() -> None:
    values = {"rule": "r", "value": 12.3456, "city": "Jakarta", "past_value": None}
    assert (
        render("{rule}: {city} {value:.1f} vs {past_value:.0f} {unknown}", values)
        == "r: Jakarta 12.3 vs n/a ?"
    )
    for bad, why in (
        ("{a.b}", "not a plain field name"),
        ("{a[0]}", "not a plain field name"),
        ("{value!r}", "conversions"),
        ("{value:.2q}", "bad format spec"),
        ("{", "does not parse"),
    ):
        with pytest.raises(ValueError, match=why):
            check_template(bad, ["a"])


def test_queries() -> None:
    rule = ThresholdRule.model_validate(
        {
            "name": "rule-a",
            "team": "t",
            "measurement": 'my "m"',
            "field": "f",
            "aggregate": "p95",
            "group_by": ["city", "kind"],
            "where": {"kind": ["car", "bike"], "status": "it's"},
            "window": "5m",
            "database": "db",
            "retention_policy": "rp",
            "crit": {"above": 1},
        }
    )
    assert threshold_query(rule, T - 300, T) == (
        'SELECT percentile("f", 95) AS "value" FROM "db"."rp"."my \\"m\\"" WHERE ("kind" = \'car\' OR "kind" = '
        "'bike') AND \"status\" = 'it\\'s' AND time > '2026-03-02T09:55:00Z' AND time <= '2026-03-02T10:00:00Z' "
        'GROUP BY "city", "kind"'
    )
    raw = ThresholdRule.model_validate(
        {
            "name": "rule-b",
            "team": "t",
            "crit": {"below": 2},
            "query": 'SELECT sum("d") FROM "x" WHERE $timeFilter GROUP BY "c"',
        }
    )
    assert threshold_query(raw, T - 60.5, T) == (
        "SELECT sum(\"d\") FROM \"x\" WHERE time > '2026-03-02T09:58:59.5Z' AND time <= '2026-03-02T10:00:00Z' "
        'GROUP BY "c"'
    )
    dead = DeadmanRule.model_validate(
        {"name": "dead", "team": "t", "kind": "deadman", "measurement": "m", "period": "5m"}
    )
    assert count_query(dead, T - 300, T, "daggers") == (
        "SELECT count(*) FROM \"daggers\"..\"m\" WHERE time > '2026-03-02T09:55:00Z' AND time <= '2026-03-02T10:00:00Z'"
    )
    for bad, why in (
        ("DROP DATABASE x", "one InfluxQL SELECT"),
        ("SELECT * FROM m WHERE $timeFilter; DROP x", "no ';'"),
        ("SELECT * INTO y FROM m WHERE $timeFilter", "must not write"),
        ("SELECT * FROM m", "needs \\$timeFilter"),
    ):
        with pytest.raises(ValueError, match=why):
            ThresholdRule.model_validate({"name": "qq", "team": "t", "crit": {"above": 1}, "query": bad})
    assert quote_ident('a"b') == '"a\\"b"' and quote_string("a'b") == "'a\\'b'"


def test_parse_series_takes_the_newest_value_per_group() -> None:
    body = {
        "results": [
            {
                "series": [
                    {
                        "name": "m",
                        "tags": {"city": "1"},
                        "columns": ["time", "value"],
                        "values": [[1000, 5], [2000, 7], [3000, None]],
                    },
                    {
                        "name": "m",
                        "tags": {"city": "2"},
                        "columns": ["time", "count_a", "count_b"],
                        "values": [[1000, 0, 4]],
                    },
                ]
            }
        ]
    }
    groups = parse_series(body)
    assert [(g.tags, g.value, g.time_ms) for g in groups] == [
        ({"city": "1"}, 7.0, 2000),
        ({"city": "2"}, 0.0, 1000),
    ]
    assert groups[1].columns == {"count_a": 0.0, "count_b": 4.0}
