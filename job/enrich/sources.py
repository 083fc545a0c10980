"""Where lookups ask: PostgreSQL, Elasticsearch and HTTP(S), each answering one request for a list of keys.

A source's :meth:`Source.fetch` takes up to :attr:`Source.request_size` keys and returns, per key, the
response document (a PostgreSQL row as a dict, an Elasticsearch ``_mget`` doc, an HTTP JSON answer) or
:data:`MISSING` (not found). It raises :class:`FetchError` when the request fails or times out. Sources are
safe to call from several threads at once; :mod:`job.enrich.engine` runs up to ``capacity`` requests at a time.
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from job.common.optional import require
from job.spec import ElasticsearchLookup, HttpLookup, LookupSpec, PostgresLookup, parse_path, pattern_fields

#: A key the source does not hold.
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

Key = tuple[Any, ...]


class FetchError(Exception):
    """A request failed or timed out (the message says how, without secrets)."""


class Source(ABC):
    """One lookup's server."""

    #: Keys per request at most.
    request_size: int = 1

    @property
    @abstractmethod
    def target(self) -> str:
        """Where the lookup asks, for people (no secrets)."""

    @abstractmethod
    def fetch(self, keys: Sequence[Key]) -> list[Any]:
        """Return, per key of ``keys`` (at most :attr:`request_size`), its document or :data:`MISSING`.

        Raises FetchError when the request fails or times out."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Default: nothing."""


class PostgresSource(Source):
    """One ``query`` with the keys' array as $1, on a pool of up to ``capacity`` connections."""

    def __init__(self, spec: PostgresLookup) -> None:
        require("psycopg", "enrich", needed_by="a postgres lookup")
        self.spec = spec
        self.request_size = spec.max_keys_per_request
        self._query = spec.query.replace("%", "%%").replace("$1", "%s")
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()

    @property
    def target(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(self.spec.dsn.get_secret_value())
        except Exception:
            return "PostgreSQL"
        return (
            f"PostgreSQL at {info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
        )

    def _connect(self) -> Any:
        import psycopg

        kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(self.spec.connect_timeout_s)),
            "options": f"-c statement_timeout={int(self.spec.timeout_s * 1000)}",
        }
        if self.spec.password is not None:
            kwargs["password"] = self.spec.password.get_secret_value()
        return psycopg.connect(self.spec.dsn.get_secret_value(), **kwargs)

    def fetch(self, keys: Sequence[Key]) -> list[Any]:
        import psycopg

        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = None
        try:
            if conn is None or conn.closed:
                conn = self._connect()
            cur = conn.execute(self._query, ([k[0] for k in keys],))
            columns = [d.name for d in cur.description or []]
            rows = cur.fetchall()
        except psycopg.Error as exc:
            if conn is not None:
                conn.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FetchError(f"{type(exc).__name__}: {first}") from None
        self._idle.put(conn)
        if not columns:
            raise FetchError("the query returns no columns")
        found: dict[Any, dict[str, Any]] = {}
        for row in rows:
            found.setdefault(row[0], dict(zip(columns, row, strict=True)))
        return [found.get(k[0], MISSING) for k in keys]

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


class ElasticsearchSource(Source):
    """One ``_mget`` of the documents' ids (``id_pattern`` filled in) with the official client, asking only for
    the ``_source`` fields the output paths read (:func:`source_fields`)."""

    def __init__(self, spec: ElasticsearchLookup) -> None:
        Elasticsearch = require("elasticsearch", "enrich", needed_by="an elasticsearch lookup").Elasticsearch
        self.spec = spec
        self.request_size = spec.max_keys_per_request
        self._columns = pattern_fields(spec.id_pattern)
        kwargs: dict[str, Any] = {
            "request_timeout": spec.timeout_s,
            "max_retries": 0,
            "retry_on_timeout": False,
            "connections_per_node": spec.capacity,
            "verify_certs": spec.verify_certs,
        }
        if spec.ca_certs:
            kwargs["ca_certs"] = spec.ca_certs
        if spec.api_key is not None:
            kwargs["api_key"] = spec.api_key.get_secret_value()
        elif spec.username:
            kwargs["basic_auth"] = (spec.username, spec.password.get_secret_value() if spec.password else "")
        self._client = Elasticsearch(spec.hosts, **kwargs)
        self.source_fields = source_fields([parse_path(o.path) for o in spec.outputs().values()])

    @property
    def target(self) -> str:
        return f"index {self.spec.index!r} at {', '.join(self.spec.hosts)}"

    def doc_id(self, key: Key) -> str:
        """Return the document id of ``key`` (``id_pattern`` with the key's values)."""
        return self.spec.id_pattern.format(**dict(zip(self._columns, key, strict=True)))

    def fetch(self, keys: Sequence[Key]) -> list[Any]:
        from elasticsearch import ApiError, TransportError

        every = [self.doc_id(k) for k in keys]
        ids = [i for i in every if i]  # an empty id (a proto3 text never set) names no document
        if not ids:
            return [MISSING] * len(keys)
        try:
            filtering: dict[str, Any] = (
                {}
                if self.source_fields is None
                else ({"source_includes": self.source_fields} if self.source_fields else {"source": False})
            )
            docs = self._client.mget(index=self.spec.index, ids=ids, **filtering).body.get("docs", [])
        except ApiError as exc:
            raise FetchError(f"Elasticsearch answered {exc.meta.status}: {exc.message}") from None
        except TransportError as exc:
            raise FetchError(f"{type(exc).__name__}: {exc.message}") from None
        if len(docs) != len(ids):
            raise FetchError(f"_mget returned {len(docs)} documents for {len(ids)} ids")
        answers = iter(docs)
        out: list[Any] = []
        for doc_id in every:
            doc = next(answers) if doc_id else {}
            if "error" in doc:
                raise FetchError(f"document {doc.get('_id')!r}: {json.dumps(doc['error'])[:200]}")
            out.append(doc if doc.get("found") else MISSING)
        return out

    def close(self) -> None:
        self._client.close()


def source_fields(paths: Sequence[tuple[str | int, ...]]) -> list[str] | None:
    """Return the ``_source`` fields an Elasticsearch lookup's output paths read (``$._source.address.city`` ->
    ``address.city``), for ``_source_includes``: [] when none reads ``_source`` (only ``_id`` and the like), None
    when one reads it whole (``$._source``)."""
    fields: list[str] = []
    for steps in paths:
        if not steps or steps[0] != "_source":
            continue
        names = []
        for step in steps[1:]:
            if not isinstance(step, str):
                break
            names.append(step)
        if not names:
            return None
        if ".".join(names) not in fields:
            fields.append(".".join(names))
    return fields


class HttpSource(Source):
    """One request a key (GET, POST or PUT), with a session per thread; 200 is found, 404 not found."""

    request_size = 1

    def __init__(self, spec: HttpLookup) -> None:
        self.spec = spec
        self._columns = spec.key_columns()
        self._local = threading.local()
        self._verify: bool | str = (spec.ca_certs or True) if spec.verify_certs else False
        self._sessions: list[Any] = []
        self._lock = threading.Lock()

    @property
    def target(self) -> str:
        parts = urllib.parse.urlsplit(self.spec.url)
        return f"{self.spec.verb} {parts.scheme}://{parts.netloc}{parts.path}"

    def _session(self) -> Any:
        import requests

        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update({k: v.get_secret_value() for k, v in self.spec.headers.items()})
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def request(self, key: Key) -> tuple[str, Any]:
        """Return the URL and the JSON body (None for a GET) of ``key``'s request."""
        values = dict(zip(self._columns, key, strict=True))
        url = self.spec.url.format(**{k: urllib.parse.quote(str(v), safe="") for k, v in values.items()})
        return url, _fill(self.spec.body, values) if self.spec.body is not None else None

    def fetch(self, keys: Sequence[Key]) -> list[Any]:
        import requests

        out = []
        for key in keys:
            url, body = self.request(key)
            try:
                # verify per request: a session's own is overridden by REQUESTS_CA_BUNDLE (requests' rule)
                resp = self._session().request(
                    self.spec.verb,
                    url,
                    json=body,
                    verify=self._verify,
                    timeout=(self.spec.connect_timeout_s, self.spec.timeout_s),
                )
            except requests.RequestException as exc:
                raise FetchError(f"{type(exc).__name__} from {self.target}") from None
            if resp.status_code == 404:
                out.append(MISSING)
                continue
            if resp.status_code != 200:
                raise FetchError(f"HTTP {resp.status_code} from {self.target}")
            try:
                out.append(resp.json())
            except ValueError:
                raise FetchError(f"the answer of {self.target} is not JSON") from None
        return out

    def close(self) -> None:
        with self._lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()


def _fill(template: Any, values: dict[str, Any]) -> Any:
    """Return the body ``template`` with ``"{column}"`` texts replaced by the values (their own types) and
    other texts' ``{column}`` filled in."""
    if isinstance(template, str):
        names = pattern_fields(template)
        if len(names) == 1 and template == "{" + names[0] + "}":
            value = values[names[0]]
            return value if value is None or isinstance(value, bool | int | float | str) else str(value)
        return template.format(**values) if names else template
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, values) for v in template]
    return template


def make_source(spec: LookupSpec) -> Source:
    """Return the source a lookup spec asks. Raises MissingDependencyError when its package is missing."""
    if isinstance(spec, PostgresLookup):
        return PostgresSource(spec)
    if isinstance(spec, ElasticsearchLookup):
        return ElasticsearchSource(spec)
    return HttpSource(spec)
