"""The PostgreSQL sink: one table per dagger, rows upserted on a key, for teams that query aggregates.

* The table (``table: name`` or ``schema.name``) is created when missing from the query's output
  schema, with a unique key on ``key_columns`` (default: ``window_timestamp`` and the
  ``tag_*``/``label_*`` columns) that treats NULLs as equal (``UNIQUE NULLS NOT DISTINCT``,
  PostgreSQL 15+; a primary key before), so a NULL tag is one key like any other.
* Each micro-batch is written in **one transaction**: rows are copied (``COPY``, ``batch_size`` rows
  at a time) into a temporary table, then ``INSERT … ON CONFLICT (key) DO UPDATE`` moves them into
  the table. A batch is either all there or not at all, and a batch that Spark replays after a
  crash overwrites the same rows with the same values: the table stays exact, without duplicates.
  Rows of one batch with the same key keep the last one.
* A lost connection (server restart, network, admin termination) is retried ``max_retries`` times
  with back-off on a new connection; other errors (a value that does not fit a column, a missing
  privilege) fail the batch at once with PostgreSQL's message.
* :meth:`PostgresSink.open` fails before any data is read when the server is unreachable, the
  credentials are refused, or the role lacks the privileges it needs (SELECT, INSERT, UPDATE on the
  table; CREATE on the schema to create it; TEMP on the database).

The dsn and password are secrets: they are never logged nor put in an error message.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from job.errors import SinkError
from job.sinks.base import Sink, backoff_s, key_columns
from job.spec import PostgresSinkSpec

log = logging.getLogger("daggers.sink.postgres")

STAGE_TABLE = "daggers_stage"
REQUIRED_PRIVILEGES = ("SELECT", "INSERT", "UPDATE")


def pg_type(arrow: pa.DataType) -> str | None:
    """Return the PostgreSQL column type for an Arrow type, or None when there is none."""
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_integer(arrow):
        width, signed = arrow.bit_width, pa.types.is_signed_integer(arrow)
        if width <= 16 and (signed or width <= 8):
            return "smallint"
        if width <= 32 and (signed or width <= 16):
            return "integer"
        if width <= 64 and signed or width <= 32:
            return "bigint"
        return "numeric(20, 0)"
    if pa.types.is_float16(arrow) or pa.types.is_float32(arrow):
        return "real"
    if pa.types.is_float64(arrow):
        return "double precision"
    if pa.types.is_decimal(arrow):
        return f"numeric({arrow.precision}, {arrow.scale})"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return "text"
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return "bytea"
    if pa.types.is_timestamp(arrow):
        return "timestamptz" if arrow.tz else "timestamp"
    if pa.types.is_date(arrow):
        return "date"
    if pa.types.is_null(arrow):
        return "text"
    return None


def split_table_name(name: str) -> tuple[str, str]:
    """Return (schema, table) of ``name`` or ``schema.name`` (default schema: public)."""
    schema, _, table = name.rpartition(".")
    return schema or "public", table


def dedupe_last(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Return ``table`` with one row per key: the last of each (NULLs compare equal); order kept."""
    if table.num_rows < 2:
        return table
    indexed = table.select(list(keys)).append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    last = indexed.group_by(list(keys), use_threads=False).aggregate([("__row", "max")])["__row_max"]
    if len(last) == table.num_rows:
        return table
    return table.take(pc.take(last, pc.sort_indices(last)))


class PostgresSink(Sink):
    """Upserts rows into a PostgreSQL table (see the module docstring)."""

    name = "postgres"

    def __init__(self, spec: PostgresSinkSpec, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__()
        self.spec = spec
        self.schema_name, self.table_name = split_table_name(spec.table)
        self._sleep = sleep
        self._conn: psycopg.Connection[Any] | None = None
        self._columns: list[str] = []
        self._keys: list[str] = []
        self._upsert: sql.Composed | None = None
        info = _conninfo(spec.dsn.get_secret_value())
        self._where = (
            f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/"
            f"{info.get('dbname') or info.get('user') or ''}"
        )
        self._secrets = [
            s
            for s in (
                spec.dsn.get_secret_value(),
                info.get("password"),
                spec.password.get_secret_value() if spec.password else None,
            )
            if s
        ]

    @property
    def target(self) -> str:
        return f"table {self.spec.table} at {self._where}"

    def __repr__(self) -> str:
        return f"PostgresSink({self._where}, table={self.schema_name}.{self.table_name})"

    @property
    def qualified(self) -> str:
        """The table as ``schema.name``."""
        return f"{self.schema_name}.{self.table_name}"

    def _clean(self, text: str) -> str:
        """Return ``text`` without any secret (dsn, password) it might contain."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.strip()

    # ---- connection ---------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {
            "connect_timeout": self.spec.connect_timeout_s,
            "application_name": f"daggers-sink-{self.table_name}"[:63],
        }
        if self.spec.password is not None:
            kwargs["password"] = self.spec.password.get_secret_value()
        try:
            return psycopg.connect(self.spec.dsn.get_secret_value(), autocommit=True, **kwargs)
        except psycopg.OperationalError as exc:
            raise _ConnectionLost(self._clean(str(exc)).splitlines()[0]) from None
        except psycopg.Error as exc:  # e.g. a malformed dsn
            raise SinkError(
                f"cannot connect to PostgreSQL at {self._where}: {self._clean(str(exc))}"
            ) from None

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop_connection()
            self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
        self._conn = None

    # ---- open ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Connect and check the table's privileges (or, when it is missing, that it may be created).

        Raises SinkError: unreachable server or refused login, missing table with ``create_table:
        false``, missing schema, or a privilege the role lacks (named, with the GRANT to run).
        """
        try:
            conn = self._connection()
        except _ConnectionLost as exc:
            raise SinkError(
                f"PostgreSQL at {self._where} is unreachable: {exc}",
                hint="is the server up, and are host, port, user and password right?",
            ) from None
        try:
            with conn.transaction():
                self._check_privileges(conn)
        except psycopg.Error as exc:
            raise SinkError(
                f"cannot check table {self.qualified} at {self._where}: {self._clean(str(exc))}"
            ) from None

    def _check_privileges(self, conn: psycopg.Connection[Any]) -> None:
        role, temp = conn.execute(
            "SELECT current_user, has_database_privilege(current_database(), 'TEMP')"
        ).fetchone() or ("?", False)
        if not temp:
            raise SinkError(
                f"role {role!r} may not create temporary tables in the database at {self._where}",
                hint=f'GRANT TEMP ON DATABASE <db> TO "{role}"',
            )
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self._regclass(),)).fetchone()
        if exists and exists[0]:
            missing = [
                p
                for p in REQUIRED_PRIVILEGES
                if not (
                    conn.execute("SELECT has_table_privilege(%s, %s)", (self._regclass(), p)).fetchone()
                    or (False,)
                )[0]
            ]
            if missing:
                raise SinkError(
                    f"role {role!r} lacks {', '.join(missing)} on table {self.qualified} at {self._where}",
                    hint=f'GRANT {", ".join(missing)} ON {self.qualified} TO "{role}"',
                )
            return
        if not self.spec.create_table:
            raise SinkError(
                f"table {self.qualified} does not exist at {self._where}",
                hint="create it, or set create_table: true on the sink",
            )
        schema = conn.execute(
            "SELECT has_schema_privilege(%s, 'CREATE') FROM pg_namespace WHERE nspname = %s",
            (self.schema_name, self.schema_name),
        ).fetchone()
        if schema is None:
            raise SinkError(
                f"schema {self.schema_name!r} does not exist at {self._where}",
                hint=f'CREATE SCHEMA "{self.schema_name}"',
            )
        if not schema[0]:
            raise SinkError(
                f"table {self.qualified} does not exist and role {role!r} may not create it "
                f"(no CREATE on schema {self.schema_name})",
                hint=f'create the table, or GRANT CREATE ON SCHEMA "{self.schema_name}" TO "{role}"',
            )

    def _regclass(self) -> str:
        return (
            sql.SQL("{}.{}")
            .format(sql.Identifier(self.schema_name), sql.Identifier(self.table_name))
            .as_string(None)
        )

    # ---- bind ---------------------------------------------------------------------------------

    def bind(self, schema: pa.Schema) -> None:
        """Create the table from ``schema`` when missing; check an existing one has every column and
        a unique key on ``key_columns`` that treats NULLs as equal (or NOT NULL key columns).

        Raises SinkError naming the column, key or type that does not work.
        """
        names = schema.names
        keys = key_columns(self.spec.key_columns, names, needed_to="upsert on", sink="postgres")
        types: dict[str, str] = {}
        for name, arrow in zip(names, schema.types, strict=True):
            pgt = pg_type(arrow)
            if pgt is None:
                raise SinkError(
                    f"column {name!r} is {arrow}, which has no PostgreSQL column type here",
                    hint="CAST it in the SQL (to a number, text or timestamp)",
                )
            types[name] = pgt
        self._run(lambda conn: self._prepare_table(conn, types, keys))
        self._columns, self._keys = names, keys
        self._upsert = self._upsert_sql(names, keys)
        super().bind(schema)

    def _prepare_table(self, conn: psycopg.Connection[Any], types: dict[str, str], keys: list[str]) -> None:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self._regclass(),)).fetchone()
        if not (exists and exists[0]):
            if not self.spec.create_table:
                raise SinkError(
                    f"table {self.qualified} does not exist at {self._where}",
                    hint="create it, or set create_table: true on the sink",
                )
            self._create_table(conn, types, keys)
            return
        self._check_table(conn, list(types), keys)

    def _create_table(self, conn: psycopg.Connection[Any], types: dict[str, str], keys: list[str]) -> None:
        table = sql.Identifier(self.schema_name, self.table_name)
        cols = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in types.items()]
        key_list = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
        constraint = sql.Identifier(f"{self.table_name}_daggers_key"[:63])
        if conn.info.server_version >= 150000:
            key = sql.SQL("CONSTRAINT {} UNIQUE NULLS NOT DISTINCT ({})").format(constraint, key_list)
        else:
            key = sql.SQL("CONSTRAINT {} PRIMARY KEY ({})").format(constraint, key_list)
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(table, sql.SQL(", ").join([*cols, key]))
        )
        log.info("created table %s at %s, upserting on (%s)", self.qualified, self._where, ", ".join(keys))

    def _check_table(self, conn: psycopg.Connection[Any], columns: list[str], keys: list[str]) -> None:
        rows = conn.execute(
            "SELECT attname, attnotnull FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attnum > 0 AND NOT attisdropped",
            (self._regclass(),),
        ).fetchall()
        not_null = {name: bool(nn) for name, nn in rows}
        absent = [c for c in columns if c not in not_null]
        if absent:
            raise SinkError(
                f"table {self.qualified} has no column {', '.join(repr(c) for c in absent)} "
                f"for the query's output",
                hint=f"ALTER TABLE {self.qualified} ADD COLUMN ...; or rename the columns in the SQL",
            )
        nulls_col = "i.indnullsnotdistinct" if conn.info.server_version >= 150000 else "false"
        indexes = conn.execute(
            f"SELECT array_agg(a.attname::text), {nulls_col} FROM pg_index i "  # noqa: S608 - no user input
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indpred IS NULL "
            "AND i.indexprs IS NULL GROUP BY i.indexrelid, 2",
            (self._regclass(),),
        ).fetchall()
        matching = [nnd for cols, nnd in indexes if sorted(cols) == sorted(keys)]
        if not matching:
            raise SinkError(
                f"table {self.qualified} has no unique index on ({', '.join(keys)}) to upsert on",
                hint=f"CREATE UNIQUE INDEX ON {self.qualified} ({', '.join(keys)}), or set key_columns "
                "to the columns of an existing one",
            )
        nullable = [k for k in keys if not not_null[k]]
        if nullable and not any(matching):
            raise SinkError(
                f"the unique index of table {self.qualified} on ({', '.join(keys)}) treats NULLs as "
                f"distinct and {', '.join(nullable)} may be NULL: a replayed batch would duplicate "
                "rows with a NULL key",
                hint="recreate the index with UNIQUE NULLS NOT DISTINCT, or make the key columns NOT NULL",
            )

    def _upsert_sql(self, columns: list[str], keys: list[str]) -> sql.Composed:
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
        rest = [c for c in columns if c not in keys]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in rest)
            )
            if rest
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
            sql.Identifier(self.schema_name, self.table_name),
            cols,
            cols,
            sql.Identifier(STAGE_TABLE),
            sql.SQL(", ").join(sql.Identifier(k) for k in keys),
            action,
        )

    # ---- write --------------------------------------------------------------------------------

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        rows = dedupe_last(table.select(self._columns), self._keys)
        if rows.num_rows < table.num_rows:
            self.metrics.rows_skipped += table.num_rows - rows.num_rows
        self._run(lambda conn: self._write_rows(conn, rows))
        return int(rows.num_rows)

    def _write_rows(self, conn: psycopg.Connection[Any], rows: pa.Table) -> None:
        upsert = self._upsert
        assert upsert is not None, "open() prepares the upsert"
        cols = sql.SQL(", ").join(sql.Identifier(c) for c in self._columns)
        conn.execute(
            sql.SQL("CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA").format(
                sql.Identifier(STAGE_TABLE), cols, sql.Identifier(self.schema_name, self.table_name)
            )
        )
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(STAGE_TABLE), cols)
        truncate = sql.SQL("TRUNCATE {}").format(sql.Identifier(STAGE_TABLE))
        with conn.cursor() as cur:
            for start in range(0, rows.num_rows, self.spec.batch_size):
                chunk = rows.slice(start, self.spec.batch_size)
                if start:
                    cur.execute(truncate)
                with cur.copy(copy) as cp:
                    for row in _rows(chunk):
                        cp.write_row(row)
                cur.execute(upsert)

    def _run(self, work: Callable[[psycopg.Connection[Any]], None]) -> None:
        """Run ``work`` in one transaction, again on a new connection after a lost one.

        Raises SinkError when the connection cannot be had after ``max_retries`` retries, or at once
        for any other database error.
        """
        attempt = 0
        while True:
            try:
                conn = self._connection()
                with conn.transaction():
                    work(conn)
                return
            except (_ConnectionLost, psycopg.OperationalError) as exc:
                reason = self._clean(str(exc)).splitlines()[0] if str(exc).strip() else type(exc).__name__
                if (
                    self._conn is not None
                    and not self._conn.broken
                    and isinstance(exc, psycopg.OperationalError)
                    and not _transient(exc)
                ):
                    raise SinkError(
                        f"PostgreSQL at {self._where} refused the write to {self.qualified}: {reason}"
                    ) from None
                self._drop_connection()
                attempt += 1
                if attempt > self.spec.max_retries:
                    raise SinkError(
                        f"giving up writing to {self.qualified} at {self._where} after {attempt} "
                        f"attempts: {reason}"
                    ) from None
                self.metrics.retries += 1
                delay = backoff_s(attempt, self.spec.max_backoff_s)
                log.warning(
                    "PostgreSQL write to %s failed (%s); retry %d/%d in %.1fs",
                    self.qualified,
                    reason,
                    attempt,
                    self.spec.max_retries,
                    delay,
                )
                self._retrying(attempt, self.spec.max_retries, delay, reason)
                self._sleep(delay)
            except psycopg.Error as exc:
                raise SinkError(
                    f"PostgreSQL at {self._where} refused the write to {self.qualified}: "
                    f"{self._clean(str(exc))}"
                ) from None

    def close(self) -> None:
        """Close the connection."""
        self._drop_connection()


class _ConnectionLost(Exception):
    """No connection to the server (refused, timed out, dropped)."""


def _transient(exc: psycopg.OperationalError) -> bool:
    """True for errors another attempt may fix on a live connection (serialization, deadlock, shutdown)."""
    return isinstance(
        exc,
        psycopg.errors.SerializationFailure
        | psycopg.errors.DeadlockDetected
        | psycopg.errors.AdminShutdown
        | psycopg.errors.CannotConnectNow
        | psycopg.errors.LockNotAvailable,
    )


def _conninfo(dsn: str) -> dict[str, str]:
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.Error:
        return {}


def _rows(table: pa.Table) -> Iterator[tuple[Any, ...]]:
    """Yield the rows of ``table`` as tuples of Python values (NaN stays a float NaN)."""
    columns = [table[name].to_pylist() for name in table.column_names]
    return zip(*columns, strict=True)
