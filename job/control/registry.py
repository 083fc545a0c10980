"""The registry database: SQLite by default (one file), PostgreSQL when many operators share it.

``Registry(url)`` opens it and creates the tables when they are missing. URLs:

* ``sqlite:///path/to/registry.db`` (the default is ``<state dir>/registry.db``);
* ``postgresql://user@host:port/db`` (psycopg 3; ``postgresql+psycopg://`` also works). Put the
  password in ``$PGPASSWORD`` or ``~/.pgpass`` rather than in the URL; a URL's password is never
  printed (see :attr:`Registry.safe_url`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from job.control.errors import ConflictError, RegistryError
from job.control.models import Base

ENV_REGISTRY = "DAGGERS_REGISTRY"
_log = logging.getLogger(__name__)


class RegistryValueError(RegistryError):
    """A value the registry's database cannot store (the server answers 422)."""

    title = "Invalid value"


class RegistryConflictError(RegistryError, ConflictError):
    """A change the database refused for a constraint another change broke first (the server answers 409)."""

    title = "Conflict"


def default_registry_url(state_dir: Path | None = None) -> str:
    """Return ``$DAGGERS_REGISTRY``, else ``sqlite:///<state dir>/registry.db``."""
    if os.environ.get(ENV_REGISTRY):
        return os.environ[ENV_REGISTRY]
    if state_dir is None:
        from job.stack.local import default_state_dir

        state_dir = default_state_dir()
    return f"sqlite:///{Path(state_dir).absolute() / 'registry.db'}"


def normalise_url(url: str) -> str:
    """Return ``url`` with a driver SQLAlchemy can use: ``postgresql://`` becomes ``postgresql+psycopg://``.

    Raises RegistryError for a URL that is neither SQLite nor PostgreSQL.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise RegistryError(
            f"registry URL {url!r} is not a database URL",
            hint="use sqlite:///path/registry.db or postgresql://user@host:port/db",
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise RegistryError(
            f"registry URL scheme {parsed.drivername!r} is not supported",
            hint="use sqlite:///path/registry.db or postgresql://user@host:port/db",
        )
    return parsed.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers (the console) never block the controller's writes
    cur.execute("PRAGMA busy_timeout=15000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Registry:
    """An open registry: an engine and a session factory. Tables are created when missing."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = normalise_url(url)
        parsed = make_url(self.url)
        self.kind = parsed.get_backend_name()
        if self.kind == "postgresql":
            from job.common.optional import require

            require("psycopg", "postgres", needed_by="a PostgreSQL registry")
        kwargs: dict[str, Any] = {"future": True}
        if self.kind == "sqlite" and parsed.database and parsed.database != ":memory:":
            try:
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RegistryError(
                    f"cannot make the registry's folder {Path(parsed.database).parent}: {exc.strerror}"
                ) from exc
            kwargs["connect_args"] = {"timeout": 15}
        else:
            kwargs["pool_pre_ping"] = True
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.kind == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if create:
            self.create_schema()

    @property
    def safe_url(self) -> str:
        """The URL with any password masked (also one given as a query parameter), for messages and logs."""
        parsed = make_url(self.url)
        masked = {k: "***" if "pass" in k.lower() else v for k, v in parsed.query.items()}
        return parsed.set(query=masked).render_as_string(hide_password=True)

    def create_schema(self) -> None:
        """Create the tables that do not exist yet. Raises RegistryError when the database is unreachable."""
        # Processes opening a new registry at once: another made a table (or column) between our check and
        # our CREATE. Each such loss means one more object exists, so the passes are bounded by their count.
        attempts = 2 + sum(1 + len(t.columns) for t in Base.metadata.sorted_tables)
        for attempt in range(attempts):
            try:
                Base.metadata.create_all(self.engine)
                self._add_missing_columns()
                return
            except OperationalError as exc:
                if attempt < attempts - 1 and _made_by_another(exc):
                    continue
                raise RegistryError(
                    f"cannot open the registry at {self.safe_url}: {_first_line(exc)}"
                ) from None

    def _add_missing_columns(self) -> None:
        """Add the nullable columns newer code knows and an older registry lacks (e.g. the failover ones)."""
        insp = inspect(self.engine)
        for table in Base.metadata.sorted_tables:
            have = {c["name"] for c in insp.get_columns(table.name)}
            for column in table.columns:
                if column.name not in have and column.nullable:
                    kind = column.type.compile(dialect=self.engine.dialect)
                    with self.engine.begin() as conn:
                        conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}'))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Yield a session in a transaction: committed on success, rolled back on any error.

        Database errors become the errors of :meth:`_error` (their messages never name the database), other
        errors pass through.
        """
        sess = self._sessions()
        try:
            yield sess
            sess.commit()
        except (SQLAlchemyError, OverflowError) as exc:
            with contextlib.suppress(SQLAlchemyError):
                sess.rollback()
            raise self._error(exc) from exc
        except BaseException:
            sess.rollback()
            raise
        finally:
            sess.close()

    def _error(self, exc: BaseException) -> RegistryError:
        """Return the error to answer for a failed database call, without the registry's address, user or
        database (a server sends it to its clients); log the cause, with the address but no password.

        A value the database cannot store (a NUL, an integer out of its column's range, a text too long) is a
        RegistryValueError (422), a broken constraint a RegistryConflictError (a concurrent change; 409), the
        rest a plain RegistryError (503), "the registry is unreachable" when its database cannot be reached.
        """
        reason = _first_line(exc)
        if isinstance(exc, OverflowError | DataError) or (
            isinstance(exc, StatementError) and not isinstance(exc, DBAPIError)
        ):
            return RegistryValueError(f"the registry cannot store a value of this request: {reason[:200]}")
        if isinstance(exc, IntegrityError):
            return RegistryConflictError(
                "another change to the registry conflicts with this one (a name was "
                "taken or a reference removed meanwhile)",
                hint="look again, then retry",
            )
        _log.warning("registry %s: %s: %s", self.safe_url, type(exc).__name__, reason)
        if isinstance(exc, OperationalError | InterfaceError | PoolTimeoutError | DisconnectionError):
            return RegistryError("the registry is unreachable", hint="try again in a moment")
        return RegistryError("the registry could not complete the request", hint="try again in a moment")

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Registry({self.safe_url!r})"


def _made_by_another(exc: OperationalError) -> bool:
    """Whether a schema statement failed only because a concurrent opener created the same object first."""
    text_ = str(exc.orig).lower()
    return "already exists" in text_ or "duplicate column" in text_


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
