"""The Elasticsearch sink: each row one document, written with the official client's bulk helpers.

* The document id is a stable hash (BLAKE2b, 128 bits) of the dagger's name and the row's key
  (``key_columns``; default window_timestamp and the tag_*/label_* columns), so a micro-batch that
  Spark replays after a crash overwrites its documents with the same values: no duplicates.
* The index may carry the window's date (``bookings-{window:%Y.%m.%d}``, see :mod:`job.common.index_pattern`).
  An index is made on its first write with a mapping from the query's output: tag_*/label_* columns
  are ``keyword``, window_timestamp (and other timestamps) ``date``, integers ``long``, other
  numbers ``double``, booleans ``boolean``, text ``keyword``. An existing index gets the mappings
  of new columns added; one whose mapping conflicts fails the write with Elasticsearch's message.
* A bulk request refused with 429 or 5xx, cut off or timed out, and the documents a bulk answer
  refuses with 429 or 5xx, are sent again with exponential back-off (``max_retries``, up to
  ``max_backoff_s``); then the sink fails. A document refused for another reason (a value that does
  not fit its mapping) fails the write at once with Elasticsearch's reason.
* Credentials (basic or an API key) come from the spec (``${VAR}`` there), held as secrets and never
  logged nor put in an error message. TLS: https hosts, ``ca_certs``, ``verify_certs``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from job.common.index_pattern import has_window, render_index
from job.common.optional import require
from job.errors import SinkError
from job.sinks.base import TAG_PREFIXES, TIME_COLUMN, Sink, SinkUnreachable, backoff_s, key_columns
from job.spec import ElasticsearchSinkSpec

log = logging.getLogger("daggers.sink.elasticsearch")

#: HTTP statuses another attempt may fix.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def es_type(arrow: pa.DataType, column: str) -> str | None:
    """Return the Elasticsearch field type of a column (``keyword`` for a tag), or None for none."""
    if column.startswith(TAG_PREFIXES):
        return "keyword"
    if pa.types.is_timestamp(arrow) or pa.types.is_date(arrow):
        return "date"
    if pa.types.is_boolean(arrow):
        return "boolean"
    if pa.types.is_integer(arrow):
        return "long" if pa.types.is_signed_integer(arrow) or arrow.bit_width < 64 else "unsigned_long"
    if pa.types.is_floating(arrow) or pa.types.is_decimal(arrow):
        return "double"
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or pa.types.is_null(arrow):
        return "keyword"
    return None


def document_id(dagger: str, key: list[tuple[str, Any]]) -> str:
    """Return the stable id of a document: a hex BLAKE2b-128 of the dagger and its (column, value) key.

    The same dagger and key give the same id in any process (no Python ``hash``)."""
    body = json.dumps(
        [dagger, [[k, _key_value(v)] for k, v in key]], separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.blake2b(body.encode(), digest_size=16).hexdigest()


def _key_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _iso(value: datetime) -> str:
    """Return a UTC ISO 8601 time with ``Z`` (naive values are taken as UTC)."""
    when = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return when.isoformat().replace("+00:00", "Z")


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None  # JSON has no NaN/inf
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if hasattr(value, "is_finite"):  # Decimal
        return float(value) if value.is_finite() else None
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _json_column(col: pa.ChunkedArray) -> list[Any]:
    """Return a column's values as JSON values: times as UTC ISO 8601 (each distinct time formatted once),
    NaN and infinities as None, decimals as floats, bytes as hex."""
    kind = col.type
    values: list[Any] = col.to_pylist()
    if pa.types.is_timestamp(kind):
        seen: dict[Any, str] = {}
        return [None if v is None else seen.get(v) or seen.setdefault(v, _iso(v)) for v in values]
    if (
        pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    ):
        return values
    return [_json_value(v) for v in values]


class ElasticsearchSink(Sink):
    """Indexes rows as documents (see the module docstring)."""

    name = "elasticsearch"

    def __init__(
        self, spec: ElasticsearchSinkSpec, dagger: str = "", sleep: Callable[[float], None] = time.sleep
    ) -> None:
        super().__init__()
        self.spec = spec
        self.dagger = dagger
        self._sleep = sleep
        self._client: Any = None
        self._keys: list[str] = []
        self._mapping: dict[str, dict[str, str]] = {}
        self._ready: set[str] = set()  # indices made or checked since the sink opened
        self._where = ", ".join(h.rstrip("/") for h in spec.hosts)
        self._secrets = [s.get_secret_value() for s in (spec.password, spec.api_key) if s is not None]

    @property
    def target(self) -> str:
        return f"index {self.spec.index} at {self._where}"

    def __repr__(self) -> str:
        return f"ElasticsearchSink({self._where}, index={self.spec.index})"

    def _clean(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text.strip()[:300]

    # ---- open ---------------------------------------------------------------------------------

    def _make_client(self) -> Any:
        elasticsearch = require("elasticsearch", "elasticsearch", needed_by="the elasticsearch sink")
        kwargs: dict[str, Any] = {
            "request_timeout": self.spec.timeout_s,
            "max_retries": 0,
            "retry_on_timeout": False,
        }
        if self.spec.api_key is not None:
            kwargs["api_key"] = self.spec.api_key.get_secret_value()
        elif self.spec.username is not None and self.spec.password is not None:
            kwargs["basic_auth"] = (self.spec.username, self.spec.password.get_secret_value())
        if any(h.startswith("https://") for h in self.spec.hosts):
            kwargs["verify_certs"] = self.spec.verify_certs
            if self.spec.ca_certs:
                if not Path(self.spec.ca_certs).is_file():
                    raise SinkError(
                        f"ca_certs {self.spec.ca_certs!r} is not a file",
                        hint="give the PEM file of the CA that signed the server's certificate",
                    )
                kwargs["ca_certs"] = self.spec.ca_certs
            if not self.spec.verify_certs:
                kwargs["ssl_show_warn"] = False
        return elasticsearch.Elasticsearch(list(self.spec.hosts), **kwargs)

    def open(self) -> None:
        """Connect and check the server answers and takes the credentials.

        Raises SinkError: no client package, an unreachable server, refused credentials, a bad CA file.
        """
        self._client = self._make_client()
        import elastic_transport
        import elasticsearch

        try:
            self._client.info()
        except elastic_transport.TransportError as exc:
            # a certificate the client does not trust is a refusal: waiting cannot fix it
            down = SinkError if isinstance(exc, elastic_transport.TlsError) else SinkUnreachable
            raise down(
                f"Elasticsearch at {self._where} is unreachable: {type(exc).__name__}",
                hint="is the server up, and are hosts and TLS settings right?",
            ) from None
        except elasticsearch.ApiError as exc:
            if exc.meta.status in (401, 403):
                raise SinkError(
                    f"Elasticsearch at {self._where} refused the credentials (HTTP {exc.meta.status})",
                    hint="check username/password or api_key on the sink",
                ) from None
            raise SinkError(
                f"Elasticsearch at {self._where} answered HTTP {exc.meta.status}: "
                f"{self._clean(str(exc.message))}"
            ) from None

    # ---- bind ---------------------------------------------------------------------------------

    def bind(self, schema: pa.Schema) -> None:
        """Work out the document key and the mapping of the query's output.

        Raises SinkError: no key column, a key column that is not in the output, a column with no
        Elasticsearch type, or an index pattern with the window's date and no window_timestamp.
        """
        names = schema.names
        keys = key_columns(
            self.spec.key_columns, names, needed_to="make document ids of", sink="elasticsearch"
        )
        if has_window(self.spec.index) and TIME_COLUMN not in names:
            raise SinkError(
                f"index {self.spec.index!r} carries the window's date but the query's output has no "
                f"{TIME_COLUMN}",
                hint="use a fixed index name, or a windowed query",
            )
        mapping: dict[str, dict[str, str]] = {}
        for name, arrow in zip(names, schema.types, strict=True):
            kind = es_type(arrow, name)
            if kind is None:
                raise SinkError(
                    f"column {name!r} is {arrow}, which has no Elasticsearch field type here",
                    hint="CAST it in the SQL (to a number, text or timestamp)",
                )
            mapping[name] = {"type": kind}
        self._keys, self._mapping, self._ready = keys, mapping, set()
        super().bind(schema)

    # ---- write --------------------------------------------------------------------------------

    def documents(self, table: pa.Table) -> list[dict[str, Any]]:
        """Return the bulk actions of ``table``: one ``index`` action (_index, _id, _source) per row.

        Rows of one batch with the same key keep the last (they share an id); a row without a
        window_timestamp is skipped (counted) when the index carries the window's date."""
        names = table.column_names
        raw_times = table[TIME_COLUMN].to_pylist() if TIME_COLUMN in names else None
        columns = [_json_column(table[n]) for n in names]
        key_at = [names.index(k) for k in self._keys]
        pattern = self.spec.index
        fixed = None if has_window(pattern) else render_index(pattern, None)
        indices: dict[datetime, str] = {}
        out: dict[str, dict[str, Any]] = {}
        for i, row in enumerate(zip(*columns, strict=True)):
            if fixed is None:
                window = raw_times[i] if raw_times is not None else None
                if window is None:
                    self.metrics.rows_skipped += 1
                    continue
                index = indices.get(window) or indices.setdefault(window, render_index(pattern, window))
            else:
                index = fixed
            doc_id = document_id(self.dagger, [(self._keys[j], row[k]) for j, k in enumerate(key_at)])
            if out.pop(doc_id, None) is not None:
                self.metrics.extra["same_key_rows"] = self.metrics.extra.get("same_key_rows", 0) + 1
            out[doc_id] = {
                "_op_type": "index",
                "_index": index,
                "_id": doc_id,
                "_source": dict(zip(names, row, strict=True)),
            }
        return list(out.values())

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        if self._client is None:
            self.open()
        actions = self.documents(table)
        pending = {a["_id"]: a for a in actions}
        attempt = 0
        while True:
            try:
                self._prepare_indices({a["_index"] for a in pending.values()})
                pending = self._bulk(pending)
                if not pending:
                    break
                error = f"{len(pending)} documents refused for now: {self._last_refusal}"
            except _Retryable as exc:
                error = str(exc)
            attempt += 1
            if attempt > self.spec.max_retries:
                raise SinkError(
                    f"giving up writing to Elasticsearch at {self._where} after {attempt} attempts: {error}",
                    hint="is the server up and not overloaded?",
                ) from None
            self.metrics.retries += 1
            delay = backoff_s(attempt, self.spec.max_backoff_s)
            log.warning(
                "Elasticsearch write failed (%s); retry %d/%d in %.1fs",
                error,
                attempt,
                self.spec.max_retries,
                delay,
            )
            self._retrying(attempt, self.spec.max_retries, delay, error)
            self._sleep(delay)
        return len(actions)

    _last_refusal = ""

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run one client call; map its errors: retryable (cut off, 429, 5xx) or SinkError (others)."""
        import elastic_transport
        import elasticsearch

        try:
            return fn()
        except elastic_transport.TransportError as exc:  # connection refused, reset, timed out
            raise _Retryable(f"cannot reach {self._where}: {type(exc).__name__}") from None
        except elasticsearch.ApiError as exc:
            status = int(exc.meta.status)
            text = self._clean(_api_text(exc))
            if status in RETRY_STATUSES:
                raise _Retryable(f"HTTP {status} on {what}: {text}") from None
            if status in (401, 403):
                raise SinkError(
                    f"Elasticsearch at {self._where} refused {what} (HTTP {status}): {text}",
                    hint="check the credentials and the role's privileges on the index",
                ) from None
            raise SinkError(
                f"Elasticsearch at {self._where} refused {what} (HTTP {status}): {text}"
            ) from None

    def _prepare_indices(self, indices: set[str]) -> None:
        """Make each index not seen yet with the mapping, or add the mapping's fields to an existing one."""
        for index in sorted(indices - self._ready):
            properties = dict(self._mapping)
            indices_api = self._client.indices
            exists = bool(self._call(f"checking index {index}", partial(indices_api.exists, index=index)))
            if not exists:
                try:
                    self._call(
                        f"creating index {index}",
                        partial(indices_api.create, index=index, mappings={"properties": properties}),
                    )
                    log.info("created index %s at %s", index, self._where)
                except SinkError as exc:
                    if "resource_already_exists" not in exc.message:
                        raise
                    exists = True
            if exists:
                self._call(
                    f"adding the mapping to index {index}",
                    partial(indices_api.put_mapping, index=index, properties=properties),
                )
            self._ready.add(index)

    def _bulk(self, pending: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Send ``pending`` (id -> action) with streaming_bulk; return the actions to send again.

        Raises _Retryable when the whole request failed, SinkError when a document was refused for good.
        """
        again: dict[str, dict[str, Any]] = {}

        extra: dict[str, Any] = {"refresh": "wait_for"} if self.spec.refresh else {}

        from elasticsearch import helpers

        def run() -> None:
            for ok, item in helpers.streaming_bulk(
                self._client,
                list(pending.values()),
                chunk_size=self.spec.batch_size,
                max_retries=0,
                raise_on_error=False,
                raise_on_exception=True,
                yield_ok=False,
                **extra,
            ):
                if ok:
                    continue
                info = next(iter(item.values()))
                status = int(info.get("status") or 0)
                reason = _item_reason(info)
                if status in RETRY_STATUSES:
                    again[info["_id"]] = pending[info["_id"]]
                    self._last_refusal = f"HTTP {status}: {self._clean(reason)}"
                    continue
                raise SinkError(
                    f"Elasticsearch refused document {info.get('_id')} in index {info.get('_index')} "
                    f"(HTTP {status}): {self._clean(reason)}"
                )

        self._call("the bulk write", run)
        return again

    def close(self) -> None:
        """Close the client's connections."""
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


class _Retryable(Exception):
    """A write failure that another attempt may fix."""


def _api_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return f"{error.get('type', '')}: {error.get('reason', '')}".strip(": ")
        if error:
            return str(error)
    return str(getattr(exc, "message", "") or exc)


def _item_reason(info: dict[str, Any]) -> str:
    error = info.get("error")
    if isinstance(error, dict):
        return f"{error.get('type', '')}: {error.get('reason', '')}".strip(": ")
    return str(error or "")
