"""The PostgreSQL sink against a real PostgreSQL 15: exact rows, replays without duplicates, a lost
connection retried, and clear errors at start (unreachable server, missing privileges, unusable table)."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import psycopg
import pyarrow as pa
import pytest

from job.errors import SinkError
from job.sinks.postgres import PostgresSink
from job.spec import PostgresSinkSpec
from job.stack.ports import free_port

pytestmark = pytest.mark.integration

W1 = datetime(2026, 3, 2, 8, 1, tzinfo=UTC)
W2 = datetime(2026, 3, 2, 8, 2, tzinfo=UTC)


def table_name() -> str:
    return f"t_{uuid.uuid4().hex[:10]}"


def batch(counts: list[int], fares: list[float] | None = None) -> pa.Table:
    n = len(counts)
    return pa.table(
        {
            "tag_city_id": pa.array([1, 1, 2, None, 3][:n], pa.int32()),
            "tag_s2id": ["-7830489120239730688", "3344475382534373376", "-7830489120239730688", "42", "7"][
                :n
            ],
            "num_of_bookings": pa.array(counts, pa.int64()),
            "avg_fare": pa.array(fares or [10.5] * n, pa.float64()),
            "window_timestamp": pa.array([W1, W1, W2, W2, W2][:n], pa.timestamp("us", tz="UTC")),
        }
    )


def sink_for(dsn: str, table: str, **settings: object) -> PostgresSink:
    spec = PostgresSinkSpec.model_validate({"type": "postgres", "dsn": dsn, "table": table, **settings})
    return PostgresSink(spec, sleep=lambda s: None)


def read(dsn: str, table: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            f"SELECT window_timestamp, tag_city_id, tag_s2id, num_of_bookings, avg_fare FROM {table} "
            "ORDER BY window_timestamp, tag_city_id NULLS LAST, tag_s2id"
        ).fetchall()


def expected(counts: list[int], fares: list[float] | None = None) -> list[tuple]:
    rows = batch(counts, fares).to_pylist()
    out = [
        (r["window_timestamp"], r["tag_city_id"], r["tag_s2id"], r["num_of_bookings"], r["avg_fare"])
        for r in rows
    ]
    return sorted(out, key=lambda r: (r[0], r[1] is None, r[1] or 0, r[2]))


def test_exact_rows_then_a_replay_leaves_them_exact(postgres) -> None:  # type: ignore[no-untyped-def]
    table = table_name()
    sink = sink_for(
        postgres.dsn, table, batch_size=2
    )  # 5 rows: three COPY + upsert rounds in one transaction
    sink.open()
    assert sink.write(batch([3, 1, 4, 1, 5]), 0) == 5
    assert read(postgres.dsn, table) == expected([3, 1, 4, 1, 5])
    assert sink.write(batch([3, 1, 4, 1, 5]), 0) == 5  # Spark replays batch 0 after a crash
    assert read(postgres.dsn, table) == expected([3, 1, 4, 1, 5])  # no duplicate, NULL tag included
    assert sink.write(batch([9, 2, 6], [1.0, 2.0, 3.5]), 1) == 3  # a later batch updates its keys only
    assert read(postgres.dsn, table) == expected([9, 2, 6, 1, 5], [1.0, 2.0, 3.5, 10.5, 10.5])
    assert sink.metrics.rows_written == 13 and sink.metrics.writes == 3 and sink.metrics.failures == 0
    sink.close()
    with psycopg.connect(postgres.dsn) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        key = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass", (table,)
        ).fetchone()
    assert columns == [
        ("tag_city_id", "integer"),
        ("tag_s2id", "text"),
        ("num_of_bookings", "bigint"),
        ("avg_fare", "double precision"),
        ("window_timestamp", "timestamp with time zone"),
    ]
    assert key == ("UNIQUE NULLS NOT DISTINCT (window_timestamp, tag_city_id, tag_s2id)",)


def test_rows_of_one_batch_with_the_same_key_keep_the_last(postgres) -> None:  # type: ignore[no-untyped-def]
    table = table_name()
    sink = sink_for(postgres.dsn, table, key_columns=["tag_s2id"])
    sink.open()
    t = pa.table(
        {
            "tag_s2id": ["a", "b", "a"],
            "n": pa.array([1, 2, 3], pa.int64()),
            "d": pa.array([Decimal("1.50"), None, Decimal("2.25")], pa.decimal128(10, 2)),
        }
    )
    assert sink.write(t, 0) == 2
    with psycopg.connect(postgres.dsn) as conn:
        assert conn.execute(f"SELECT tag_s2id, n, d FROM {table} ORDER BY 1").fetchall() == [
            ("a", 3, Decimal("2.25")),
            ("b", 2, None),
        ]
    assert sink.metrics.rows_skipped == 1
    sink.close()


def test_a_lost_connection_is_retried(postgres, caplog) -> None:  # type: ignore[no-untyped-def]
    table = table_name()
    sink = sink_for(postgres.dsn, table)
    sink.open()
    sink.write(batch([3, 1]), 0)
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (f"daggers-sink-{table}",),
        ).fetchone()
    assert killed == (1,)
    with caplog.at_level(logging.WARNING, logger="daggers.sink.postgres"):
        assert sink.write(batch([3, 1, 4]), 1) == 3
    assert read(postgres.dsn, table) == expected([3, 1, 4])
    assert sink.metrics.retries == 1 and sink.metrics.failures == 0
    assert "retry 1/5" in caplog.text
    sink.close()


def test_unreachable_server_fails_at_open_without_the_password() -> None:
    sink = sink_for(f"postgresql://daggers:pw-s3cret@127.0.0.1:{free_port()}/db", "t", connect_timeout_s=2)
    with pytest.raises(SinkError) as info:
        sink.open()
    text = str(info.value)
    assert text.startswith(
        f"PostgreSQL at 127.0.0.1:{sink._where.split(':')[1]} is unreachable: connection failed"
    )
    assert "Connection refused" in text and "pw-s3cret" not in text and "pw-s3cret" not in repr(sink)


def test_missing_privileges_are_named_at_open(postgres) -> None:  # type: ignore[no-untyped-def]
    role, table = f"r_{uuid.uuid4().hex[:8]}", table_name()
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(
            f"CREATE TABLE {table} (window_timestamp timestamptz, tag_s2id text, n bigint, "
            "UNIQUE NULLS NOT DISTINCT (window_timestamp, tag_s2id))"
        )
        admin.execute(f"GRANT SELECT ON {table} TO {role}")
    as_role = postgres.dsn.replace("postgres@", f"{role}:pw-s3cret@")
    with pytest.raises(SinkError) as info:
        sink_for(as_role, table).open()
    assert (
        info.value.message == f"role '{role}' lacks INSERT, UPDATE on table public.{table} at "
        f"127.0.0.1:{postgres.port}/postgres"
    )
    assert info.value.hint == f'GRANT INSERT, UPDATE ON public.{table} TO "{role}"'
    with pytest.raises(
        SinkError,
        match=f"table public.missing_{table} does not exist and role '{role}' may not "
        "create it \\(no CREATE on schema public\\)",
    ):
        sink_for(as_role, f"missing_{table}").open()
    with pytest.raises(SinkError, match="schema 'nope' does not exist"):
        sink_for(as_role, "nope.t").open()

    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"GRANT INSERT, UPDATE ON {table} TO {role}")
    sink = sink_for(as_role, table)
    sink.open()  # now allowed
    rows = pa.table(
        {
            "window_timestamp": pa.array([W1], pa.timestamp("us", tz="UTC")),
            "tag_s2id": ["x"],
            "n": pa.array([7], pa.int64()),
        }
    )
    assert sink.write(rows, 0) == 1 and sink.write(rows, 0) == 1
    with psycopg.connect(postgres.dsn) as conn:
        assert conn.execute(f"SELECT tag_s2id, n FROM {table}").fetchall() == [("x", 7)]
    sink.close()


def test_an_existing_table_that_cannot_take_the_output_fails_at_bind(postgres) -> None:  # type: ignore[no-untyped-def]
    no_key, no_col, nulls = table_name(), table_name(), table_name()
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {no_key} (window_timestamp timestamptz, tag_s2id text, n bigint)")
        admin.execute(
            f"CREATE TABLE {no_col} (window_timestamp timestamptz, tag_s2id text, "
            "UNIQUE (window_timestamp, tag_s2id))"
        )
        admin.execute(
            f"CREATE TABLE {nulls} (window_timestamp timestamptz, tag_s2id text, n bigint, "
            "UNIQUE (window_timestamp, tag_s2id))"
        )
    schema = pa.schema(
        [("window_timestamp", pa.timestamp("us", tz="UTC")), ("tag_s2id", pa.string()), ("n", pa.int64())]
    )
    cases = {
        no_key: f"table public.{no_key} has no unique index on (window_timestamp, tag_s2id) to upsert on",
        no_col: f"table public.{no_col} has no column 'n' for the query's output",
        nulls: f"the unique index of table public.{nulls} on (window_timestamp, tag_s2id) treats NULLs as distinct "
        "and window_timestamp, tag_s2id may be NULL: a replayed batch would duplicate rows with a NULL key",
    }
    for table, message in cases.items():
        sink = sink_for(postgres.dsn, table)
        sink.open()
        with pytest.raises(SinkError) as info:
            sink.bind(schema)
        assert info.value.message == message
        sink.close()
    sink = sink_for(postgres.dsn, table_name())
    sink.open()
    with pytest.raises(SinkError, match=r"output \(n\) has no window_timestamp or tag_\*/label_\* column"):
        sink.bind(pa.schema([("n", pa.int64())]))
    sink.close()
