"""Read a dagger's output back from its PostgreSQL sink: sums of one column per step."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from job.common.optional import require
from job.output.model import OutputError
from job.spec import IDENT_RE, PostgresSinkSpec

TIME_COLUMN = "window_timestamp"
_NUMERIC = ("smallint", "integer", "bigint", "real", "double precision", "numeric")


class PostgresOutput:
    """Sums of one column per step from the sink's table (bucketed on window_timestamp)."""

    def __init__(self, spec: PostgresSinkSpec) -> None:
        require("psycopg", "postgres", needed_by="reading a postgres sink")
        self.spec = spec
        schema, _, table = spec.table.rpartition(".")
        self.schema, self.table = schema or "public", table

    def describe(self) -> str:
        """Return what the rows are read from, for people (without the server)."""
        return f"table {self.schema}.{self.table}"

    def server(self) -> str:
        """Return the server and database the rows are read from, as host:port/db (no credentials)."""
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(self.spec.dsn.get_secret_value())
        except Exception:  # a dsn psycopg cannot read: say nothing of it
            info = {}
        return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname') or ''}"

    def _run(self, query: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        import psycopg

        kwargs: dict[str, Any] = {
            "connect_timeout": self.spec.connect_timeout_s,
            "options": "-c TimeZone=UTC",
        }
        if self.spec.password is not None:
            kwargs["password"] = self.spec.password.get_secret_value()
        try:
            with psycopg.connect(self.spec.dsn.get_secret_value(), **kwargs) as conn:
                return list(conn.execute(query, params).fetchall())
        except psycopg.OperationalError:
            raise OutputError(f"PostgreSQL at {self.server()} is unreachable or refused the login") from None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OutputError(f"PostgreSQL refused reading {self.schema}.{self.table}: {first}") from None

    def fields(self) -> list[str]:
        """Return the numeric columns of the table, in table order."""
        rows = self._run(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = "
            "%(s)s AND table_name = %(t)s ORDER BY ordinal_position",
            {"s": self.schema, "t": self.table},
        )
        return [name for name, kind in rows if kind in _NUMERIC and not name.startswith(("tag_", "label_"))]

    def read(
        self, field: str, start: datetime, end: datetime, step_s: int, tag: tuple[str, str] | None
    ) -> list[tuple[datetime, float]]:
        """Return (step start, sum of ``field``) for each step of (start, end] that has rows, oldest first.

        Raises OutputError: the server is down, the table or column is missing."""
        from psycopg import sql

        known = self.fields()
        if field not in known:
            raise OutputError(
                f"table {self.schema}.{self.table} has no numeric column {field!r}",
                hint=f"choose one of: {', '.join(known)}" if known else "has the dagger written yet?",
            )
        if tag is not None and not IDENT_RE.match(tag[0]):
            raise OutputError(f"--tag {tag[0]!r} is not a column name")
        query = sql.SQL(
            "SELECT to_timestamp(floor(extract(epoch FROM {t}) / %(step)s) * %(step)s), sum({f})::float8 "
            "FROM {table} WHERE {t} > %(start)s AND {t} <= %(end)s{tag} GROUP BY 1 ORDER BY 1"
        ).format(
            t=sql.Identifier(TIME_COLUMN),
            f=sql.Identifier(field),
            table=sql.Identifier(self.schema, self.table),
            tag=sql.SQL(" AND {}::text = %(value)s").format(sql.Identifier(tag[0])) if tag else sql.SQL(""),
        )
        rows = self._run(
            query, {"step": step_s, "start": start, "end": end, "value": tag[1] if tag else None}
        )
        return [(t.astimezone(UTC), float(v)) for t, v in rows if v is not None]
