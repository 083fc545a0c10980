"""The enrichment engine with a fake source: distinct keys in batches, the TTL cache, misses, errors under both
``fail_on_errors`` settings, and replay from the answers kept for a batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from job.enrich.engine import Enricher
from job.enrich.replay import ReplayStore
from job.enrich.sources import MISSING, FetchError, Key, Source
from job.errors import EnrichError, SpecError
from job.spec import PostgresLookup
from tests.helpers import FakeClock


class FakeSource(Source):
    """Answers from ``docs``; records every request's keys; fails while ``down``."""

    def __init__(self, docs: dict[Any, Any], request_size: int = 2) -> None:
        self.docs = docs
        self.request_size = request_size
        self.requests: list[list[Any]] = []
        self.down = False

    @property
    def target(self) -> str:
        return "the fake"

    def fetch(self, keys: Sequence[Key]) -> list[Any]:
        self.requests.append([k[0] for k in keys])
        if self.down:
            raise FetchError("connection refused")
        return [self.docs.get(k[0], MISSING) for k in keys]


def lookup(**extra: Any) -> PostgresLookup:
    settings: dict[str, Any] = {
        "type": "postgres",
        "name": "customers",
        "dsn": "postgresql://x@127.0.0.1/db",
        "key": "customer_id",
        "query": "SELECT id, name, age FROM customers WHERE id = ANY($1)",
        "max_keys_per_request": 2,
        "capacity": 2,
        "retries": 1,
        "output_mapping": {"customer_name": "name", "customer_age": {"path": "$.age", "type": "long"}},
    }
    return PostgresLookup.model_validate({**settings, **extra})


DOCS = {
    "c1": {"id": "c1", "name": "Ann", "age": 31},
    "c2": {"id": "c2", "name": "Bob", "age": "40"},
    "c3": {"id": "c3", "name": "Cy", "age": "old"},
}


def batch(customers: list[str | None]) -> pa.Table:
    return pa.table({"customer_id": pa.array(customers, pa.string()), "n": list(range(len(customers)))})


def test_distinct_keys_in_batches_and_rows_in_order() -> None:
    source = FakeSource(DOCS)
    enricher = Enricher([lookup()], sources={"customers": source})
    out = enricher.enrich(batch(["c2", "c1", "c9", None, "c1", "c3", "c2"]), 0)
    assert out.to_pylist() == [
        {"customer_id": "c2", "n": 0, "customer_name": "Bob", "customer_age": 40},
        {"customer_id": "c1", "n": 1, "customer_name": "Ann", "customer_age": 31},
        {"customer_id": "c9", "n": 2, "customer_name": None, "customer_age": None},
        {"customer_id": None, "n": 3, "customer_name": None, "customer_age": None},
        {"customer_id": "c1", "n": 4, "customer_name": "Ann", "customer_age": 31},
        {"customer_id": "c3", "n": 5, "customer_name": "Cy", "customer_age": None},  # "old" is no long
        {"customer_id": "c2", "n": 6, "customer_name": "Bob", "customer_age": 40},
    ]
    # 4 distinct keys, 2 a request: 2 requests, each key asked once
    assert sorted(sorted(r) for r in source.requests) == [["c1", "c2"], ["c3", "c9"]]
    m = enricher.metrics()["customers"]
    assert (m["rows"], m["keys"], m["fetched"], m["requests"], m["found"], m["not_found"]) == (
        7,
        4,
        4,
        2,
        3,
        1,
    )
    assert (m["rows_not_found"], m["rows_without_key"], m["rows_with_errors"], m["bad_values"]) == (
        1,
        1,
        0,
        1,
    )


def test_cache_answers_within_ttl_then_asks_again() -> None:
    source, clock = FakeSource(DOCS), FakeClock()
    enricher = Enricher([lookup(cache_ttl_s=60)], sources={"customers": source}, timer=clock)
    enricher.enrich(batch(["c1", "c9"]), 0)
    source.requests.clear()
    source.docs = {**DOCS, "c1": {"id": "c1", "name": "Ann B", "age": 32}, "c9": {"id": "c9", "name": "Nine"}}
    clock.now = 59.0
    out = enricher.enrich(batch(["c1", "c9", "c2"]), 1)
    assert out.column("customer_name").to_pylist() == ["Ann", None, "Bob"]  # cached, a cached miss too
    assert source.requests == [["c2"]]
    clock.now = 61.0
    out = enricher.enrich(batch(["c1", "c9"]), 2)
    assert out.column("customer_name").to_pylist() == ["Ann B", "Nine"]
    m = enricher.metrics()["customers"]
    assert (m["keys"], m["cache_hits"], m["hit_rate"]) == (7, 2, round(2 / 7, 4))


def test_server_down_without_fail_on_errors_writes_nulls_and_counts() -> None:
    source = FakeSource(DOCS)
    enricher = Enricher([lookup(fail_on_errors=False, retries=1)], sources={"customers": source})
    source.down = True
    out = enricher.enrich(batch(["c1", "c1", "c2"]), 0)
    assert out.num_rows == 3
    assert out.column("customer_name").to_pylist() == [None, None, None]
    m = enricher.metrics()["customers"]
    assert (m["errors"], m["rows_with_errors"], m["requests"], m["retries"]) == (2, 3, 2, 1)
    assert m["last_error"] == "connection refused"
    # errors are not cached: back up, the next batch is enriched
    source.down = False
    assert enricher.enrich(batch(["c1"]), 1).column("customer_name").to_pylist() == ["Ann"]


def test_server_down_with_fail_on_errors_names_the_lookup() -> None:
    source = FakeSource(DOCS)
    source.down = True
    enricher = Enricher([lookup(fail_on_errors=True, retries=0)], sources={"customers": source})
    with pytest.raises(EnrichError) as info:
        enricher.enrich(batch(["c1", "c2"]), 0)
    assert info.value.message == "lookup 'customers' (the fake) failed for 2 of 2 keys: connection refused"
    assert "\n" not in info.value.message


def test_replayed_batch_reuses_its_answers(tmp_path: Path) -> None:
    spark_dir = tmp_path / "spark"
    spark_dir.mkdir()
    (spark_dir / "metadata").write_text('{"id":"q-1"}')
    source = FakeSource(DOCS)
    first = Enricher([lookup()], ReplayStore(tmp_path / "lookups", spark_dir), sources={"customers": source})
    rows = batch(["c1", "c9", "c2"])
    written = first.enrich(rows, 5)
    # the dagger is killed before batch 5 commits; the source changes; a new process runs batch 5 again
    source.docs = {"c1": {"id": "c1", "name": "Changed", "age": 1}, "c9": {"id": "c9", "name": "New"}}
    source.requests.clear()
    again = Enricher([lookup()], ReplayStore(tmp_path / "lookups", spark_dir), sources={"customers": source})
    assert again.enrich(rows.take([2, 0, 1]), 5).sort_by("n").to_pylist() == written.to_pylist()
    assert source.requests == []
    assert again.metrics()["customers"]["replayed_batches"] == 1
    # the next batch asks again, and the answers of batch 5 are gone
    assert again.enrich(rows, 6).column("customer_name").to_pylist() == ["Changed", "New", None]
    assert sorted(p.name for p in (tmp_path / "lookups").iterdir()) == ["6"]
    # a checkpoint made again (another query id) does not reuse what an older query kept
    (spark_dir / "metadata").write_text('{"id":"q-2"}')
    source.docs = DOCS
    fresh = Enricher([lookup()], ReplayStore(tmp_path / "lookups", spark_dir), sources={"customers": source})
    assert fresh.enrich(rows, 6).column("customer_name").to_pylist() == ["Ann", None, "Bob"]


def test_several_key_columns_and_lookups_in_order() -> None:
    from job.spec import HttpLookup

    class Pairs(Source):
        request_size = 1
        target = "pairs"
        seen: list[Key] = []

        def fetch(self, keys: Sequence[Key]) -> list[Any]:
            self.seen.extend(keys)
            return [{"label": f"{k[0]}/{k[1]}"} for k in keys]

    http = HttpLookup.model_validate(
        {"type": "http", "url": "http://h/x/{customer_name}/{n}", "output_mapping": {"label": "$.label"}}
    )
    pairs = Pairs()
    enricher = Enricher([lookup(), http], sources={"customers": FakeSource(DOCS), "http": pairs})
    out = enricher.enrich(batch(["c1", "c2", "c1", "c9"]), 0)
    assert out.column("label").to_pylist() == ["Ann/0", "Bob/1", "Ann/2", None]  # c9: no name, no key
    assert sorted(pairs.seen) == [("Ann", 0), ("Ann", 2), ("Bob", 1)]


def test_bind_names_a_missing_key_column_and_a_repeated_column() -> None:
    enricher = Enricher([lookup()], sources={"customers": FakeSource(DOCS)})
    schema = enricher.bind(pa.schema([("customer_id", pa.string()), ("n", pa.int64())]))
    assert schema.names == ["customer_id", "n", "customer_name", "customer_age"]
    assert schema.field("customer_age").type == pa.int64()
    with pytest.raises(SpecError) as info:
        enricher.bind(pa.schema([("customer", pa.string())]))
    assert info.value.message == (
        "lookups[0] (customers).key: the SQL does not output column 'customer_id'; its rows have customer"
    )
    assert info.value.hint == "did you mean customer?"
    with pytest.raises(SpecError) as info:
        enricher.bind(pa.schema([("customer_id", pa.string()), ("customer_name", pa.string())]))
    assert (
        info.value.message
        == "lookups[0] (customers).output_mapping: column 'customer_name' is already in the rows"
    )


def test_an_empty_batch_gets_the_typed_columns() -> None:
    source = FakeSource(DOCS)
    out = Enricher([lookup()], sources={"customers": source}).enrich(batch([]), 0)
    assert out.schema.names == ["customer_id", "n", "customer_name", "customer_age"]
    assert out.num_rows == 0 and source.requests == []


def test_a_dead_server_costs_a_batch_one_round_of_failures_not_one_per_request() -> None:
    source = FakeSource(DOCS, request_size=1)
    source.down = True
    enricher = Enricher([lookup(capacity=1, retries=1)], sources={"customers": source})
    out = enricher.enrich(batch([f"k{i}" for i in range(10)]), 0)
    assert out.column("customer_name").to_pylist() == [None] * 10
    assert len(source.requests) == 2  # the first request and its retry; the other 9 were not sent
    m = enricher.metrics()["customers"]
    assert (m["errors"], m["rows_with_errors"], m["last_error"]) == (10, 10, "connection refused")
    source.down = False  # the next batch asks again
    assert enricher.enrich(batch(["c1", "c2"]), 1).column("customer_name").to_pylist() == ["Ann", "Bob"]
