"""Each lookup source against a real server: PostgreSQL (one = ANY($1) query a batch), noida-db's Elasticsearch
(one _mget a batch) and an HTTP server started here (one call a distinct key, up to capacity at once): exact
values, misses, and a server that is down under both fail_on_errors settings."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from job.enrich.engine import Enricher
from job.errors import EnrichError
from job.spec import ElasticsearchLookup, HttpLookup, PostgresLookup
from job.stack.ports import free_port
from tests.helpers import unique
from tests.job.enrich.servers import es_profiles, json_server, pg_customers

pytestmark = pytest.mark.integration

ROWS = pa.table({"customer_id": ["c1", "c2", "c9", "c1", None, "c3"], "n": [0, 1, 2, 3, 4, 5]})


def pg_lookup(dsn: str, table: str, **extra: Any) -> PostgresLookup:
    return PostgresLookup.model_validate(
        {
            "type": "postgres",
            "name": "customers",
            "dsn": dsn,
            "key": "customer_id",
            "max_keys_per_request": 2,
            "query": f"SELECT customer_id, name, tier, score FROM {table} WHERE customer_id = ANY($1)",
            "output_mapping": {"customer_name": "name", "customer_score": {"path": "score", "type": "long"}},
            "retries": 0,
            "connect_timeout_s": 2,
            **extra,
        }
    )


def test_postgres_batches_distinct_keys_in_any_queries(postgres) -> None:  # type: ignore[no-untyped-def]
    table = unique("customers").replace("-", "_")
    pg_customers(
        postgres.dsn, table, [("c1", "Ann", "gold", 31), ("c2", "Bob", "silver", 40), ("c3", "Cy", "gold", 7)]
    )
    enricher = Enricher([pg_lookup(postgres.dsn, table)])
    try:
        out = enricher.enrich(ROWS, 0)
        assert out.select(["n", "customer_name", "customer_score"]).to_pylist() == [
            {"n": 0, "customer_name": "Ann", "customer_score": 31},
            {"n": 1, "customer_name": "Bob", "customer_score": 40},
            {"n": 2, "customer_name": None, "customer_score": None},
            {"n": 3, "customer_name": "Ann", "customer_score": 31},
            {"n": 4, "customer_name": None, "customer_score": None},
            {"n": 5, "customer_name": "Cy", "customer_score": 7},
        ]
        m = enricher.metrics()["customers"]
        # 4 distinct keys, 2 a query: 2 queries
        assert (m["keys"], m["requests"], m["found"], m["not_found"], m["errors"]) == (4, 2, 3, 1, 0)
        assert m["target"].startswith("PostgreSQL at 127.0.0.1:")
    finally:
        enricher.close()


def test_postgres_down_under_both_settings(postgres) -> None:  # type: ignore[no-untyped-def]
    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    lenient = Enricher([pg_lookup(dsn, "nowhere", fail_on_errors=False)])
    out = lenient.enrich(ROWS, 0)
    assert out.column("customer_name").to_pylist() == [None] * 6
    m = lenient.metrics()["customers"]
    assert (m["rows"], m["rows_with_errors"], m["rows_without_key"], m["errors"]) == (6, 5, 1, 4)
    strict = Enricher([pg_lookup(dsn, "nowhere", fail_on_errors=True)])
    with pytest.raises(EnrichError) as info:
        strict.enrich(ROWS, 0)
    assert info.value.message.startswith("lookup 'customers' (PostgreSQL at 127.0.0.1:")
    assert "failed for 4 of 4 keys: OperationalError: connection" in info.value.message


def es_lookup(url: str, index: str, **extra: Any) -> ElasticsearchLookup:
    return ElasticsearchLookup.model_validate(
        {
            "type": "elasticsearch",
            "name": "profiles",
            "hosts": [url],
            "index": index,
            "id_pattern": "{customer_id}",
            "max_keys_per_request": 2,
            "retries": 0,
            "timeout_s": 3,
            "output_mapping": {
                "city": "$._source.address.city",
                "age": {"path": "$._source.age", "type": "long"},
                "profile": {"path": "$._source", "type": "json"},
            },
            **extra,
        }
    )


def test_elasticsearch_mget_exact_and_misses(elasticsearch) -> None:  # type: ignore[no-untyped-def]
    index = unique("profiles")
    es_profiles(
        elasticsearch.url,
        index,
        {"c1": {"age": 31, "address": {"city": "Jakarta"}}, "c3": {"age": 7, "address": {"city": "Bandung"}}},
    )
    enricher = Enricher([es_lookup(elasticsearch.url, index)])
    try:
        out = enricher.enrich(ROWS, 0)
        assert out.select(["n", "city", "age", "profile"]).to_pylist() == [
            {"n": 0, "city": "Jakarta", "age": 31, "profile": '{"address":{"city":"Jakarta"},"age":31}'},
            {"n": 1, "city": None, "age": None, "profile": None},
            {"n": 2, "city": None, "age": None, "profile": None},
            {"n": 3, "city": "Jakarta", "age": 31, "profile": '{"address":{"city":"Jakarta"},"age":31}'},
            {"n": 4, "city": None, "age": None, "profile": None},
            {"n": 5, "city": "Bandung", "age": 7, "profile": '{"address":{"city":"Bandung"},"age":7}'},
        ]
        m = enricher.metrics()["profiles"]
        assert (m["keys"], m["requests"], m["found"], m["not_found"], m["rows_not_found"]) == (4, 2, 2, 2, 2)
    finally:
        enricher.close()


def test_elasticsearch_down_under_both_settings() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    lenient = Enricher([es_lookup(url, "profiles", fail_on_errors=False)])
    assert lenient.enrich(ROWS, 0).column("city").to_pylist() == [None] * 6
    assert lenient.metrics()["profiles"]["rows_with_errors"] == 5
    strict = Enricher([es_lookup(url, "profiles", fail_on_errors=True)])
    with pytest.raises(EnrichError) as info:
        strict.enrich(ROWS, 0)
    assert info.value.message.startswith(
        f"lookup 'profiles' (index 'profiles' at {url}) failed for 4 of 4 keys: ConnectionError"
    )


def http_lookup(base: str, **extra: Any) -> HttpLookup:
    return HttpLookup.model_validate(
        {
            "type": "http",
            "name": "segments",
            "url": base + "/segments/{customer_id}",
            "capacity": 3,
            "retries": 0,
            "timeout_s": 3,
            "connect_timeout_s": 1,
            "output_mapping": {"segment": "$.segment", "rank": {"path": "$.ranks[0]", "type": "double"}},
            **extra,
        }
    )


def test_http_one_call_per_distinct_key_exact_and_misses() -> None:
    docs = {
        "/segments/c1": {"segment": "loyal", "ranks": [1.5, 2]},
        "/segments/c2": {"segment": "new", "ranks": []},
        "/segments/c%2F3": {"segment": "quoted", "ranks": [3]},
    }
    rows = pa.table({"customer_id": ["c1", "c2", "c9", "c1", None, "c/3"]})
    with json_server(docs) as server:
        enricher = Enricher([http_lookup(server.url)])
        out = enricher.enrich(rows, 0)
        assert out.select(["segment", "rank"]).to_pylist() == [
            {"segment": "loyal", "rank": 1.5},
            {"segment": "new", "rank": None},
            {"segment": None, "rank": None},
            {"segment": "loyal", "rank": 1.5},
            {"segment": None, "rank": None},
            {"segment": "quoted", "rank": 3.0},
        ]
        assert sorted(p for _, p, _ in server.requests) == [
            "/segments/c%2F3",
            "/segments/c1",
            "/segments/c2",
            "/segments/c9",
        ]
        # within the TTL a key is asked once
        enricher.enrich(rows, 1)
        assert len(server.requests) == 4
        enricher.close()


def test_http_post_body_and_a_failing_server_under_both_settings() -> None:
    body = {"id": "{customer_id}", "note": "for {customer_id}"}
    docs = {'/profile?{"id": "c1", "note": "for c1"}': {"segment": "loyal", "ranks": [1]}}
    rows = pa.table({"customer_id": ["c1", "c2"]})
    with json_server(docs) as server:
        server.failing.add('/profile?{"id": "c2", "note": "for c2"}')
        lenient = Enricher([http_lookup(server.url, url=server.url + "/profile", verb="post", body=body)])
        assert lenient.enrich(rows, 0).column("segment").to_pylist() == ["loyal", None]
        m = lenient.metrics()["segments"]
        assert (m["found"], m["errors"], m["rows_with_errors"], m["last_error"]) == (
            1,
            1,
            1,
            f"HTTP 500 from POST {server.url}/profile",
        )
        strict = Enricher(
            [
                http_lookup(
                    server.url, url=server.url + "/profile", verb="post", body=body, fail_on_errors=True
                )
            ]
        )
        with pytest.raises(EnrichError) as info:
            strict.enrich(rows, 0)
        assert info.value.message == (
            f"lookup 'segments' (POST {server.url}/profile) failed for 1 of 2 keys: "
            f"HTTP 500 from POST {server.url}/profile"
        )
    down = Enricher([http_lookup(f"http://127.0.0.1:{free_port()}")])
    assert down.enrich(rows, 0).column("segment").to_pylist() == [None, None]
    assert down.metrics()["segments"]["rows_with_errors"] == 2


@pytest.mark.filterwarnings(
    "ignore::urllib3.exceptions.InsecureRequestWarning"
)  # verify_certs: false, on purpose
def test_https_checks_the_certificate(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.job.enrich.servers import self_signed

    cert, key = self_signed(tmp_path)
    rows = pa.table({"customer_id": ["c1"]})
    with json_server({"/segments/c1": {"segment": "loyal", "ranks": []}}, tls=(cert, key)) as server:
        assert server.url.startswith("https://")
        trusting = Enricher([http_lookup(server.url, ca_certs=str(cert))])
        assert trusting.enrich(rows, 0).column("segment").to_pylist() == ["loyal"]
        unchecked = Enricher([http_lookup(server.url, verify_certs=False)])
        assert unchecked.enrich(rows, 0).column("segment").to_pylist() == ["loyal"]
        # a certificate nobody vouches for: an error, the row written with NULL
        default = Enricher([http_lookup(server.url)])
        assert default.enrich(rows, 0).column("segment").to_pylist() == [None]
        assert (
            default.metrics()["segments"]["last_error"]
            == f"SSLError from GET {server.url}/segments/{{customer_id}}"
        )


def test_elasticsearch_asks_only_for_the_source_fields_it_reads(elasticsearch) -> None:  # type: ignore[no-untyped-def]
    from job.enrich.sources import ElasticsearchSource, source_fields

    assert source_fields([("_source", "address", "city"), ("_source", "tags", 0), ("_id",)]) == [
        "address.city",
        "tags",
    ]
    assert source_fields([("_id",)]) == []
    assert source_fields([("_source", "age"), ("_source",)]) is None
    index = unique("profiles")
    es_profiles(
        elasticsearch.url,
        index,
        {"c1": {"age": 31, "address": {"city": "Jakarta", "zip": "10110"}, "secret": "not needed"}},
    )
    spec = es_lookup(
        elasticsearch.url, index, output_mapping={"city": "$._source.address.city", "id": "$._id"}
    )
    source = ElasticsearchSource(spec)
    try:
        assert source.source_fields == ["address.city"]
        doc = source.fetch([("c1",), ("c9",)])
        assert doc[0]["_source"] == {"address": {"city": "Jakarta"}} and doc[0]["_id"] == "c1"
        only_ids = ElasticsearchSource(es_lookup(elasticsearch.url, index, output_mapping={"id": "$._id"}))
        assert "_source" not in only_ids.fetch([("c1",)])[0]
        only_ids.close()
    finally:
        source.close()
