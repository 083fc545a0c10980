"""DartGet and DartContains: look-ups in key-value collections kept in a store, cached per worker.

The original platform kept each collection as a JSON object in a GCS bucket and re-read it when
its cache was older than the call's refresh rate (hours). Here the store is a folder or an
``http(s)://`` URL with the original's layout::

    <store>/dart-get/<collection>        {"key": "value", ...}
    <store>/dart-contains/<collection>   {"data": ["item", ...]}

Each Python worker keeps the collections it has read (:data:`_STORES`), so a batch makes at most
one read per collection and usually none; the look-ups themselves are Arrow kernels over the
batch (``index_in``, ``is_in``, one combined regular expression), never per-row Python.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from job.common import urls
from job.common.urls import as_url
from job.errors import FunctionError

log = logging.getLogger(__name__)

DEFAULT_REFRESH_HOURS = 1.0
"""DartContains' refresh rate when the call names none (the original's default)."""
FETCH_TIMEOUT_S = 10.0


@dataclass
class _Entry:
    fetched_at: float
    keys: pa.Array
    values: pa.Array | None  # None for a set (dart-contains)
    patterns: dict[str, str] = field(default_factory=dict)  # regex template -> combined pattern


def store_url(store: str) -> str:
    """Return ``store`` as a URL: ``http(s)://`` and ``file://`` as they are, a path as ``file://``."""
    return as_url(store)


def read_url(url: str) -> bytes:
    """Return the bytes at a ``file://`` or ``http(s)://`` URL; raise FunctionError naming it."""
    try:
        return urls.read_url(url, FETCH_TIMEOUT_S)
    except OSError as exc:
        raise FunctionError(str(exc)) from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def parse_map(data: bytes, url: str) -> tuple[pa.Array, pa.Array]:
    """Return (keys, values) of a dart-get collection: a JSON object (non-string values as JSON text)."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise FunctionError(f"{url} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise FunctionError(f"{url}: a dart-get collection is a JSON object of key: value")
    items = [(str(k), None if v is None else _text(v)) for k, v in doc.items()]
    return pa.array([k for k, _ in items], pa.string()), pa.array([v for _, v in items], pa.string())


def parse_set(data: bytes, url: str) -> pa.Array:
    """Return the distinct items of a dart-contains collection: ``{"data": [...]}``."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise FunctionError(f"{url} is not JSON: {exc}") from None
    items = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise FunctionError(f'{url}: a dart-contains collection is a JSON object {{"data": [...]}}')
    return pc.unique(pa.array([_text(i) for i in items if i is not None], pa.string()))


class DartStore:
    """The collections of one store as one Python worker sees them, each re-read when older than
    the refresh rate of the call that reads it, or when it was empty (as the original)."""

    def __init__(
        self, url: str, clock: Callable[[], float] = time.monotonic, reader: Callable[[str], bytes] = read_url
    ) -> None:
        self.url = url
        self._clock = clock
        self._read = reader
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()
        self.reads = 0

    def _entry(self, kind: str, name: str, refresh_hours: float) -> _Entry:
        with self._lock:
            entry = self._entries.get((kind, name))
            now = self._clock()
            if entry is not None and len(entry.keys) and now - entry.fetched_at <= refresh_hours * 3600:
                return entry
            if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
                raise FunctionError(f"{name!r} is not a collection name: a name holds no '/', '\\' or '..'")
            url = f"{self.url}/{kind}/{urllib.parse.quote(name, safe='')}"
            try:
                data = self._read(url)
                self.reads += 1
                if kind == "dart-get":
                    keys, values = parse_map(data, url)
                    fresh = _Entry(now, keys, values)
                else:
                    fresh = _Entry(now, parse_set(data, url), None)
            except FunctionError as exc:
                if entry is None:
                    raise
                log.warning("%s; keeping the copy read %.0f s ago", exc, now - entry.fetched_at)
                entry.fetched_at = now  # try again after another refresh period, not on every batch
                return entry
            self._entries[(kind, name)] = fresh
            return fresh

    def get(self, name: str, keys: pa.Array, refresh_hours: float) -> pa.Array:
        """The values of ``keys`` in collection ``name`` (NULL for a key it lacks)."""
        entry = self._entry("dart-get", name, refresh_hours)
        assert entry.values is not None
        return entry.values.take(pc.index_in(keys.cast(pa.string()), value_set=entry.keys))

    def contains(
        self, name: str, values: pa.Array, refresh_hours: float, regex: str | None = None
    ) -> pa.Array:
        """Whether each value is in collection ``name``, or (``regex``) fully matches the pattern that
        ``regex`` makes of some item by putting it in place of ``%s``. NULL values are not."""
        entry = self._entry("dart-contains", name, refresh_hours)
        text = values.cast(pa.string())
        if regex is None:
            found = pc.is_in(text, value_set=entry.keys)
        elif not len(entry.keys):
            found = pa.array([False] * len(text))
        else:
            if regex not in entry.patterns:
                alternatives = [
                    regex.replace("%%", "\0").replace("%s", item).replace("\0", "%")
                    for item in entry.keys.to_pylist()
                ]
                entry.patterns[regex] = "^(?:" + "|".join(f"(?:{a})" for a in alternatives) + ")$"
            found = pc.match_substring_regex(text, entry.patterns[regex])
        return pc.fill_null(found, False)


_STORES: dict[str, DartStore] = {}
_STORES_LOCK = threading.Lock()


def store_for(url: str) -> DartStore:
    """Return this worker's store of ``url`` (created once per process)."""
    with _STORES_LOCK:
        if url not in _STORES:
            _STORES[url] = DartStore(url)
        return _STORES[url]


def _groups(names: pa.Array) -> list[tuple[str | None, pa.Array]]:
    """Return (collection name, row mask) for each distinct name of a batch (usually one literal)."""
    unique = pc.unique(names.cast(pa.string())).to_pylist()
    if len(unique) == 1:
        return [(unique[0], pa.array([True] * len(names)))]
    return [
        (n, pc.fill_null(pc.equal(names, n), False) if n is not None else pc.is_null(names)) for n in unique
    ]


def _refresh(hours: pa.Array | None, mask: pa.Array) -> float:
    if hours is None:
        return DEFAULT_REFRESH_HOURS
    value = pc.min(pc.filter(hours.cast(pa.float64()), mask)).as_py()
    return DEFAULT_REFRESH_HOURS if value is None else float(value)


def _combine(parts: list[tuple[pa.Array, pa.Array]], length: int, kind: pa.DataType) -> pa.Array:
    if len(parts) == 1 and len(parts[0][1]) == length:
        return parts[0][1]
    out = pa.nulls(length, kind)
    for mask, values in parts:
        out = pc.replace_with_mask(out, mask, values)
    return out


def dart_get(
    url: str, names: pa.Array, keys: pa.Array, hours: pa.Array, default: pa.Array | None = None
) -> pa.Array:
    """DartGet over Arrow arrays: NULL (or ``default``) for a key the collection lacks."""
    store = store_for(url)
    parts = []
    for name, mask in _groups(names):
        if name is None:
            continue
        parts.append((mask, store.get(name, pc.filter(keys, mask), _refresh(hours, mask))))
    got = _combine(parts, len(keys), pa.string()) if parts else pa.nulls(len(keys), pa.string())
    return got if default is None else pc.coalesce(got, default.cast(pa.string()))


def dart_contains(url: str, names: pa.Array, values: pa.Array, *rest: pa.Array) -> pa.Array:
    """DartContains over Arrow arrays: ``rest`` is ``[refresh]``, ``[regex]`` or ``[regex, refresh]``."""
    regex = next((r for r in rest if pa.types.is_string(r.type) or pa.types.is_large_string(r.type)), None)
    hours = next((r for r in rest if r is not regex), None)
    store = store_for(url)
    parts = []
    for name, mask in _groups(names):
        if name is None:
            continue
        pattern = None
        if regex is not None:
            pattern = pc.min(pc.filter(regex, mask)).as_py()  # a literal: one pattern per batch
            if pattern is None:
                continue
        parts.append((mask, store.contains(name, pc.filter(values, mask), _refresh(hours, mask), pattern)))
    got = _combine(parts, len(values), pa.bool_()) if parts else pa.nulls(len(values), pa.bool_())
    return pc.fill_null(got, False)
