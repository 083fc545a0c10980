"""Issue 38's enrichment end to end: real daggers (broker -> Spark -> PostgreSQL sink) enriched from a real
PostgreSQL, noida-db's Elasticsearch and an HTTP server: exact rows with misses; a replayed batch writes the
same rows although the sources changed; a lookup server down under both fail_on_errors settings; a SIGKILL
mid-stream and a restart with exact output after."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from job.errors import EnrichError
from job.query.plan import plan
from job.query.runner import run_foreground
from job.schema import default_registry
from job.spec import parse_spec
from job.stack.ports import free_port
from tests.helpers import unique, wait_until
from tests.job.enrich.servers import es_profiles, json_server, pg_customers
from tests.job.test_engine_recovery import _kill_group, _start_dagger, _status

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
CUSTOMERS = [("c1", "Ann", "gold", 31), ("c2", "Bob", "silver", 40), ("c3", "Cy", "gold", 7)]
PROFILES = {
    "c1": {"age": 31, "address": {"city": "Jakarta"}},
    "c2": {"age": 40, "address": {"city": "Bandung"}},
}
SEGMENTS = {"/segments/c1": {"segment": "loyal"}, "/segments/c3": {"segment": "new"}}
COLUMNS = [
    "order_number",
    "customer_id",
    "city_id",
    "customer_name",
    "customer_tier",
    "profile_city",
    "profile_age",
    "segment",
]


def produce_bookings(
    bootstrap: str, topic: str, customers: list[str], first: int = 0, start: datetime = T0
) -> list[str]:
    """Produce one booking per customer id (order o<first+i>, city i % 3 + 1, one second apart from ``start``);
    return the orders."""
    from confluent_kafka import Producer

    cls = default_registry().message_class("daggers.events.BookingLog")
    producer = Producer({"bootstrap.servers": bootstrap})
    orders = []
    for i, customer in enumerate(customers, start=first):
        msg = cls(order_number=f"o{i:04d}", customer_id=customer, city_id=i % 3 + 1, status=4)
        msg.event_timestamp.FromDatetime(start + timedelta(seconds=i))
        producer.produce(topic, msg.SerializeToString())
        orders.append(f"o{i:04d}")
    producer.flush()
    return orders


def spec_text(
    *,
    name: str,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    pg_dsn: str,
    customers: str,
    es_url: str,
    index: str,
    http_url: str,
    out_table: str,
    fail_on_errors: bool = False,
    max_records_per_batch: int = 0,
    more_sinks: str = "",
) -> str:
    return f"""name: {name}
streams:
  - table: booking
    topics: [{topic}]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: {name}
    max_records_per_batch: {max_records_per_batch}
sql: SELECT order_number, customer_id, city_id FROM booking
checkpoint_dir: {checkpoint}
trigger_interval_s: 0.5
lookups:
  - type: postgres
    name: customers
    dsn: {pg_dsn}
    key: customer_id
    query: SELECT customer_id, name, tier FROM {customers} WHERE customer_id = ANY($1)
    retries: 0
    output_mapping:
      customer_name: name
      customer_tier: $.tier
  - type: elasticsearch
    name: profiles
    hosts: [{es_url}]
    index: {index}
    id_pattern: "{{customer_id}}"
    retries: 0
    output_mapping:
      profile_city: $._source.address.city
      profile_age: {{path: $._source.age, type: long}}
  - type: http
    name: segments
    url: {http_url}/segments/{{customer_id}}
    fail_on_errors: {str(fail_on_errors).lower()}
    retries: 0
    connect_timeout_s: 10
    timeout_s: 30
    output_mapping:
      segment: $.segment
sinks:
  - type: postgres
    dsn: {pg_dsn}
    table: {out_table}
    key_columns: [order_number]
{more_sinks}"""


def out_rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT {', '.join(COLUMNS)} FROM {table} ORDER BY order_number").fetchall()


def expected(
    orders: list[str], customers: list[str], names: dict[str, str] | None = None, segments: bool = True
) -> list[tuple[Any, ...]]:
    pg = {c: (n, t) for c, n, t, _ in CUSTOMERS}
    if names:
        pg = {c: (names.get(c, n), t) for c, (n, t) in pg.items()}
    out = []
    for i, (order, customer) in enumerate(zip(orders, customers, strict=True)):
        name, tier = pg.get(customer, (None, None))
        profile = PROFILES.get(customer)
        segment = SEGMENTS.get(f"/segments/{customer}", {}).get("segment") if segments else None
        out.append(
            (
                order,
                customer,
                int(order[1:]) % 3 + 1 if order else i,
                name,
                tier,
                profile["address"]["city"] if profile else None,
                profile["age"] if profile else None,
                segment,
            )
        )
    return out


@pytest.fixture
def sources(postgres, elasticsearch):  # type: ignore[no-untyped-def]
    """The lookup sources' data: customers in PostgreSQL, profiles in Elasticsearch, segments over HTTP."""
    customers, index = unique("customers").replace("-", "_"), unique("profiles")
    pg_customers(postgres.dsn, customers, CUSTOMERS)
    es_profiles(elasticsearch.url, index, PROFILES)
    with json_server(SEGMENTS) as http:
        yield {"customers": customers, "index": index, "http": http}


def make(
    tmp_path: Path,
    tansu_broker: str,
    postgres: Any,
    elasticsearch: Any,
    sources: dict[str, Any],
    **extra: Any,
) -> tuple[str, str, str, Path]:
    """Return (topic, output table, spec text, checkpoint) of a new dagger over a new topic."""
    from tests.services import BrokerHandle

    topic, out_table = unique("enrich"), unique("enriched").replace("-", "_")
    BrokerHandle("tansu", tansu_broker).create_topic(topic, partitions=2)
    checkpoint = tmp_path / "ckpt"
    settings = {"http_url": sources["http"].url, **extra}
    text = spec_text(
        name=unique("enrich"),
        bootstrap=tansu_broker,
        topic=topic,
        checkpoint=checkpoint,
        pg_dsn=postgres.dsn,
        customers=sources["customers"],
        es_url=elasticsearch.url,
        index=sources["index"],
        out_table=out_table,
        **settings,
    )
    return topic, out_table, text, checkpoint


def test_exact_enriched_rows_with_misses_then_the_same_after_a_replay(  # type: ignore[no-untyped-def]
    spark, tansu_broker, postgres, elasticsearch, sources, tmp_path
) -> None:
    topic, out_table, text, checkpoint = make(tmp_path, tansu_broker, postgres, elasticsearch, sources)
    customers = ["c1", "c2", "c3", "c9", "c1", "", "c2", "c3", "c1", "c9"]
    orders = produce_bookings(tansu_broker, topic, customers)
    spec = parse_spec(text)
    run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    want = expected(orders, customers)
    assert out_rows(postgres.dsn, out_table) == want
    assert want[3] == (
        "o0003",
        "c9",
        1,
        None,
        None,
        None,
        None,
        None,
    )  # a miss everywhere: NULLs, not dropped
    lookups = _status(checkpoint)["lookups"]
    # distinct keys c1 c2 c3 c9 "" (each asked once: the cache holds the rest)
    assert {
        n: (m["keys"], m["found"], m["not_found"], m["errors"], m["rows"]) for n, m in lookups.items()
    } == {"customers": (5, 3, 2, 0, 10), "profiles": (5, 2, 3, 0, 10), "segments": (5, 2, 3, 0, 10)}
    assert sorted(p for _, p, _ in sources["http"].requests) == [
        "/segments/",
        "/segments/c1",
        "/segments/c2",
        "/segments/c3",
        "/segments/c9",
    ]

    # The sources change; the dagger's last batch runs again as after a crash between the sinks and the commit:
    # it writes what it wrote before (the answers kept in the checkpoint), not what the sources hold now.
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {sources['customers']} SET name = 'Changed'")
    sources["http"].docs["/segments/c9"] = {"segment": "late"}
    commits = checkpoint / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {out_table} SET customer_name = 'overwritten?'")
    run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert out_rows(postgres.dsn, out_table) == want
    assert all(m["replayed_batches"] == 1 for m in _status(checkpoint)["lookups"].values())


def test_a_lookup_server_down_under_both_settings(  # type: ignore[no-untyped-def]
    spark, tansu_broker, postgres, elasticsearch, sources, tmp_path
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    customers = ["c1", "c2", "c9", "c1"]
    # fail_on_errors: false -> every row is written, the segment NULL, and counted
    topic, out_table, text, checkpoint = make(
        tmp_path / "lenient", tansu_broker, postgres, elasticsearch, sources, http_url=down
    )
    orders = produce_bookings(tansu_broker, topic, customers)
    run_foreground(plan(parse_spec(text), tmp_path), available_now=True, spark=spark)
    assert out_rows(postgres.dsn, out_table) == expected(orders, customers, segments=False)
    segments = _status(checkpoint)["lookups"]["segments"]
    assert (segments["rows_with_errors"], segments["errors"], segments["found"]) == (4, 3, 0)
    assert segments["last_error"] == f"ConnectionError from GET {down}/segments/{{customer_id}}"

    # fail_on_errors: true -> the dagger stops with an error naming the lookup, and writes nothing
    topic, out_table, text, checkpoint = make(
        tmp_path / "strict",
        tansu_broker,
        postgres,
        elasticsearch,
        sources,
        http_url=down,
        fail_on_errors=True,
    )
    produce_bookings(tansu_broker, topic, customers)
    with pytest.raises(EnrichError) as info:
        run_foreground(plan(parse_spec(text), tmp_path), available_now=True, spark=spark)
    assert info.value.title == "Lookup error"
    assert info.value.message == (
        f"lookup 'segments' (GET {down}/segments/{{customer_id}}) failed for 3 of 3 keys: "
        f"ConnectionError from GET {down}/segments/{{customer_id}}"
    )
    assert "\n" not in info.value.message
    status = _status(checkpoint)
    assert status["state"] == "failed" and status["last_error"].startswith("Lookup error: lookup 'segments'")
    assert status["lookups"]["segments"]["errors"] == 3  # counted up to the failure
    assert out_rows(postgres.dsn, out_table) == []  # the sink made its table at start; no row reached it


@pytest.mark.slow
def test_sigkill_mid_stream_then_restart_gives_exact_rows(  # type: ignore[no-untyped-def]
    tansu_broker, postgres, elasticsearch, sources, tmp_path
) -> None:
    """The dagger writes to PostgreSQL, then to a stand-in InfluxDB that holds one write: it is killed with a
    batch written to PostgreSQL and not committed. The customers' names change while it is down; started
    again, it writes that batch again with the answers it had (the rows keep their values), and every later
    batch with the new names."""
    from tests.job.enrich.servers import influx_gate

    topic, out_table, text, checkpoint = make(
        tmp_path, tansu_broker, postgres, elasticsearch, sources, max_records_per_batch=20
    )
    with influx_gate("gate") as gate:
        text = (
            text
            + f"  - type: influx\n    url: {gate.url}\n    database: gate\n    measurement: m\n    timeout_s: 600\n"
        )
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(text)
        log = tmp_path / "dagger.log"
        first = (["c1", "c2", "c3", "c9"] * 50)[:200]
        orders = produce_bookings(tansu_broker, topic, first)
        proc = _start_dagger(spec_path, tmp_path, log)
        try:
            wait_until(
                "the first batches",
                lambda: _status(checkpoint).get("input_rows", 0) >= 40,
                360,
                proc=proc,
                log=log,
            )
            gate.opened.clear()
            wait_until("a write held by the gate", gate.blocked.is_set, 300, proc=proc, log=log)
            _kill_group(proc, signal.SIGKILL)  # the held batch is in PostgreSQL, not committed
            held = max(int(p.name) for p in (checkpoint / "spark" / "offsets").iterdir() if p.name.isdigit())
            assert not (checkpoint / "spark" / "commits" / str(held)).exists()
            before = {r[0]: r for r in out_rows(postgres.dsn, out_table)}
            assert 0 < len(before) < 200
            with psycopg.connect(postgres.dsn, autocommit=True) as conn:
                conn.execute(f"UPDATE {sources['customers']} SET name = name || '2'")
            second = ["c3", "c1", "c9"] * 20
            orders += produce_bookings(tansu_broker, topic, second, first=200)
            gate.opened.set()
            proc = _start_dagger(spec_path, tmp_path, log)
            wait_until(
                "every row in PostgreSQL",
                lambda: len(out_rows(postgres.dsn, out_table)) == 260,
                360,
                proc=proc,
                log=log,
            )
            wait_until(
                "the status", lambda: _status(checkpoint).get("input_rows", 0) >= 260, 180, proc=proc, log=log
            )
        finally:
            _kill_group(proc, signal.SIGTERM)
    got = out_rows(postgres.dsn, out_table)
    old = expected(orders, first + second)
    new = expected(orders, first + second, names={"c1": "Ann2", "c2": "Bob2", "c3": "Cy2"})
    assert [r[0] for r in got] == orders  # each booking once
    for row, was, now in zip(got, old, new, strict=True):
        # written before the kill (the held batch too): unchanged by the replay; read after the restart: new names
        assert row == before.get(row[0], now)
        assert row[0] not in before or row == was
    status = _status(checkpoint)
    assert status["input_rows"] == 260
    # the restarted dagger enriched the held batch from the answers kept in the checkpoint
    assert {n: m["replayed_batches"] for n, m in status["lookups"].items()} == {
        "customers": 1,
        "profiles": 1,
        "segments": 1,
    }


def test_preview_shows_the_enriched_rows(  # type: ignore[no-untyped-def]
    spark, tansu_broker, postgres, elasticsearch, sources, tmp_path
) -> None:
    from job.query.preview import preview

    topic, out_table, text, checkpoint = make(tmp_path, tansu_broker, postgres, elasticsearch, sources)
    customers = ["c1", "c9", "c2"]
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    orders = produce_bookings(tansu_broker, topic, customers, start=now)
    table = preview(parse_spec(text), minutes=10, spark=spark)
    assert table.column_names == COLUMNS
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == expected(orders, customers)
    assert not checkpoint.exists()  # nothing deployed, no answers kept
