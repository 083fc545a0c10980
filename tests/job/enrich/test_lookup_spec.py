"""Lookups in the spec: they load; bad paths, patterns and queries are named with their field and line; a key
column the SQL does not output, or a new column it does, fails ``daggers sql check`` naming the lookup."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from job.cli import app
from job.errors import SpecError
from job.spec import ElasticsearchLookup, HttpLookup, PostgresLookup, parse_path, parse_spec

HEAD = """name: enriched-bookings
streams:
  - table: booking
    topics: [booking-log]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: g1
sql: SELECT order_number, customer_id, city_id FROM booking
sink:
  type: log
lookups:
"""

PG = """  - type: postgres
    name: customers
    dsn: postgresql://app@db:5432/crm
    key: customer_id
    query: SELECT customer_id, name, tier FROM customers WHERE customer_id = ANY($1)
    output_mapping:
      customer_name: name
      customer_tier: {path: $.tier, type: string}
"""
ES = """  - type: elasticsearch
    name: profiles
    hosts: [http://127.0.0.1:9200]
    index: customers
    id_pattern: "{customer_id}"
    fail_on_errors: true
    output_mapping:
      profile_city: $._source.address.city
"""
HTTP = """  - type: http
    url: http://profiles:8080/segments/{customer_name}/{city_id}
    capacity: 16
    output_mapping:
      segment: $.segments[0].name
"""


def test_lookups_load_in_order() -> None:
    spec = parse_spec(HEAD + PG + ES + HTTP, "s.yaml")
    pg, es, http = spec.lookups
    assert (
        isinstance(pg, PostgresLookup)
        and isinstance(es, ElasticsearchLookup)
        and isinstance(http, HttpLookup)
    )
    assert pg.key_columns() == ["customer_id"] and not pg.fail_on_errors and pg.cache_ttl_s == 300
    assert es.key_columns() == ["customer_id"] and es.fail_on_errors
    assert http.key_columns() == ["customer_name", "city_id"] and http.capacity == 16 and http.verb == "GET"
    assert "app@db" not in repr(pg)  # the dsn is a secret


def test_paths() -> None:
    assert parse_path("$._source.address.city") == ("_source", "address", "city")
    assert parse_path("$.segments[0].name") == ("segments", 0, "name")
    assert parse_path("$['odd key'][2]") == ("odd key", 2)
    assert parse_path("email") == ("email",)
    assert parse_path("$") == ()
    for bad in ("$..name", "$.a[*]", "a.b", "$.", ""):
        with pytest.raises(ValueError, match="is not a response path"):
            parse_path(bad)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "profile_city: $._source.address.city",
            "profile_city: $._source..city",
            "s.yaml:28: lookups[1].output_mapping.profile_city.path: '$._source..city' is not a response path",
        ),
        (
            "customer_tier: {path: $.tier, type: string}",
            "customer_tier: {path: $.tier, type: text}",
            "s.yaml:20: lookups[0].output_mapping.customer_tier.type: Input should be 'string', 'long', 'double', "
            "'boolean' or 'json'",
        ),
        (
            "customer_name: name",
            "customer-name: name",
            "s.yaml:19: lookups[0].output_mapping: 'customer-name' is not a column name",
        ),
        (
            'id_pattern: "{customer_id}"',
            'id_pattern: "{customer id}"',
            "s.yaml:25: lookups[1].id_pattern: '{customer id}': {customer id} is not a column name",
        ),
        (
            "ANY($1)",
            "ANY($2)",
            "s.yaml:17: lookups[0].query: the query must hold $1 (the array of keys) exactly once",
        ),
        (
            "capacity: 16",
            "capacity: 0",
            "s.yaml:31: lookups[2].capacity: 0 is not a whole number from 1 to 256",
        ),
        (
            "hosts: [http://127.0.0.1:9200]",
            "hosts: [127.0.0.1:9200]",
            "s.yaml:23: lookups[1].hosts: '127.0.0.1:9200' is not an http(s):// URL",
        ),
        (
            "    fail_on_errors: true\n",
            "    fail_on_error: true\n",
            "s.yaml:26: lookups[1].fail_on_error: unknown field; did you mean fail_on_errors?",
        ),
    ],
)
def test_bad_fields_are_named_with_their_line(old: str, new: str, message: str) -> None:
    text = HEAD + PG + ES + HTTP
    assert old in text
    with pytest.raises(SpecError) as info:
        parse_spec(text.replace(old, new), "s.yaml")
    assert message in str(info.value), str(info.value)


def test_a_get_with_a_body_and_a_request_without_a_column() -> None:
    with pytest.raises(SpecError, match="a GET has no body"):
        parse_spec(HEAD + HTTP.replace("    capacity: 16\n", "    body: {id: x}\n"), "s.yaml")
    with pytest.raises(SpecError, match="neither the url nor the body names a column"):
        parse_spec(
            HEAD
            + HTTP.replace("/segments/{customer_name}/{city_id}", "/all").replace(
                "    capacity: 16\n", "    verb: post\n    body: {id: x}\n"
            ),
            "s.yaml",
        )


runner = CliRunner()


def check(tmp_path: Path, text: str) -> tuple[int, str]:
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    result = runner.invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    return result.exit_code, re.sub(r"\s+", " ", result.output)


def test_sql_check_accepts_lookups_on_the_sql_output_and_earlier_lookups(tmp_path: Path) -> None:
    code, output = check(tmp_path, HEAD + PG + ES + HTTP)
    assert code == 0, output
    assert "OK enriched-bookings" in output


def test_sql_check_names_a_key_column_the_sql_does_not_output(tmp_path: Path) -> None:
    code, output = check(tmp_path, HEAD + PG + ES.replace('"{customer_id}"', '"{customer}"'))
    assert code == 2
    assert (
        "Invalid dagger spec: lookups[1] (profiles).id_pattern: the SQL does not output column 'customer'; its "
        "rows have order_number, customer_id, city_id, customer_name, customer_tier"
    ) in output
    assert "hint: did you mean customer_id or customer_tier or customer_name?" in output
    assert "Traceback" not in output
    # a lookup cannot use a later lookup's column
    code, output = check(tmp_path, HEAD + HTTP + PG)
    assert code == 2
    assert "lookups[0] (http).url: the SQL does not output column 'customer_name'" in output


def test_sql_check_names_a_new_column_the_rows_have(tmp_path: Path) -> None:
    code, output = check(tmp_path, HEAD + PG.replace("customer_name: name", "city_id: name"))
    assert code == 2
    assert "lookups[0] (customers).output_mapping: column 'city_id' is already in the rows" in output


def test_the_docs_example_is_a_valid_spec(tmp_path: Path) -> None:
    page = Path("docs/howto/enrich.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", page, re.S)
    assert example is not None
    code, output = check(tmp_path, example.group(1))
    assert code == 0, output


def test_secrets_of_lookups_in_clear_text_are_refused_for_the_registry() -> None:
    from job.control.specs import check_no_clear_secrets

    data = {
        "lookups": [
            {"type": "postgres", "dsn": "postgresql://app:hunter2@db/crm"},
            {"type": "elasticsearch", "password": "${ES_PASSWORD}", "api_key": "abc"},
            {
                "type": "http",
                "headers": {"Authorization": "Bearer x", "Accept": "application/json", "X-Api-Key": "${KEY}"},
            },
        ]
    }
    with pytest.raises(SpecError) as info:
        check_no_clear_secrets(data)
    assert info.value.message == (
        "lookups[0].dsn, lookups[1].api_key, lookups[2].headers.Authorization: a secret in "
        "clear text would be stored in the registry"
    )
    check_no_clear_secrets(
        {
            "lookups": [
                {
                    "dsn": "postgresql://app@db/crm",
                    "password": "${PG}",
                    "headers": {"Authorization": "${AUTH}"},
                }
            ]
        }
    )


def test_the_progress_report_shows_each_lookup() -> None:
    from job.cli.control.dagger_views import lookup_lines

    metrics = {
        "profiles": {
            "rows": 12000,
            "keys": 800,
            "hit_rate": 0.75,
            "requests": 4,
            "not_found": 10,
            "errors": 0,
            "rows_with_errors": 0,
            "mean_ms": 12.34,
            "target": "index 'c' at http://es:9200",
        },
        "segments": {
            "rows": 5,
            "keys": 2,
            "hit_rate": 0.0,
            "requests": 2,
            "not_found": 0,
            "errors": 2,
            "rows_with_errors": 5,
            "mean_ms": 1000.0,
            "target": "GET http://s/x",
            "last_error": "HTTP 503 from GET http://s/x",
        },
    }
    assert lookup_lines(metrics) == [
        "lookup profiles: 12,000 rows, 800 keys (75% from the cache), 4 requests, 10 not found, 0 errors "
        "(0 rows with NULLs), 12.3 ms a batch to index 'c' at http://es:9200",
        "lookup segments: 5 rows, 2 keys (0% from the cache), 2 requests, 0 not found, 2 errors (5 rows with NULLs), "
        "1,000.0 ms a batch to GET http://s/x; last error: HTTP 503 from GET http://s/x",
    ]


def test_a_dagger_with_lookups_does_not_fuse(tmp_path: Path) -> None:
    from job.query.plan import plan
    from job.shared.fusion import why_not_fusible

    assert why_not_fusible(plan(parse_spec(HEAD + PG, "s.yaml"), tmp_path)) == "it has lookups"
    assert why_not_fusible(plan(parse_spec(HEAD.replace("lookups:\n", ""), "s.yaml"), tmp_path)) is None


def test_a_body_column_the_sql_does_not_output_names_the_body(tmp_path: Path) -> None:
    http = HTTP.replace("/segments/{customer_name}/{city_id}", "/segments").replace(
        "    capacity: 16\n", '    verb: POST\n    body: {id: "{customer_id}", day: "{day}"}\n'
    )
    code, output = check(tmp_path, HEAD + http)
    assert code == 2
    assert "lookups[0] (http).body: the SQL does not output column 'day'" in output
