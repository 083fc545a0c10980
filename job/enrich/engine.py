"""Enrich a micro-batch's rows (an Arrow table) with the spec's lookups, in order, before the sinks.

For each lookup: the batch's distinct keys (:func:`job.enrich.keys.distinct_keys`), those not in its TTL cache
asked of the source in requests of up to ``max_keys_per_request`` keys, up to ``capacity`` at once, each
retried ``retries`` times (once one has failed after its retries, the batch's requests not yet sent fail
without being sent: a dead server costs a batch one round of timeouts); the answers' paths made the columns' types once per key; then every row takes its
key's values by index. A row is never dropped: a key that is not found, a NULL key, and (with
``fail_on_errors: false``) a key whose request failed give NULLs, counted in :class:`LookupMetrics`. With
``fail_on_errors: true`` a failed request raises :class:`~job.errors.EnrichError` naming the lookup.

Cache and replay: a key's answer (found or not found, never an error) is reused for ``cache_ttl_s``; the
answers a batch was enriched with are kept in the checkpoint (:mod:`job.enrich.replay`) until the next batch,
and a batch Spark runs again after a crash reuses them, so it writes the same rows whatever the cache or the
source hold by then.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from job.enrich.cache import ABSENT, TtlCache
from job.enrich.keys import distinct_keys, spread
from job.enrich.replay import FAILED, FOUND, ReplayStore
from job.enrich.sources import MISSING, FetchError, Key, Source, make_source
from job.enrich.values import ARROW_TYPES, column_values
from job.errors import EnrichError
from job.spec import LookupSpec, check_lookups, lookup_names, parse_path

#: The first wait before a failed request is sent again; it doubles with each retry.
RETRY_WAIT_S = 0.2


@dataclass
class LookupMetrics:
    """What a lookup has done since the dagger started (status.json's ``lookups``).

    ``keys``: distinct keys the batches asked for; ``cache_hits`` of them answered from the cache, ``fetched``
    asked of the server in ``requests`` (retries included); ``found`` / ``not_found`` / ``errors``: the
    fetched keys' outcomes; rows: ``rows`` enriched, ``rows_not_found`` whose key was not found,
    ``rows_without_key`` with a NULL in the key, ``rows_with_errors`` written with NULLs because the request
    failed; ``bad_values``: answers not of their column's type (NULL); ``replayed_batches``: batches enriched
    from the answers kept for a replay. Latency: milliseconds per batch, the lookup's share."""

    lookup_type: str = ""
    target: str = ""
    batches: int = 0
    rows: int = 0
    keys: int = 0
    cache_hits: int = 0
    fetched: int = 0
    requests: int = 0
    retries: int = 0
    found: int = 0
    not_found: int = 0
    errors: int = 0
    rows_not_found: int = 0
    rows_without_key: int = 0
    rows_with_errors: int = 0
    bad_values: int = 0
    replayed_batches: int = 0
    last_ms: float = 0.0
    max_ms: float = 0.0
    total_ms: float = 0.0
    last_error: str | None = None

    @property
    def hit_rate(self) -> float:
        """The share of keys answered from the cache (0.0 before the first)."""
        return self.cache_hits / self.keys if self.keys else 0.0

    def to_dict(self) -> dict[str, object]:
        """Return the metrics as JSON-able values, with ``hit_rate`` and ``mean_ms``."""
        out: dict[str, object] = dict(self.__dict__)
        out["hit_rate"] = round(self.hit_rate, 4)
        out["mean_ms"] = round(self.total_ms / self.batches, 3) if self.batches else 0.0
        return out


@dataclass
class _Answers:
    """One lookup's answers for a batch's distinct keys, in their order."""

    values: list[tuple[Any, ...] | None]  # per key: the output values, or None (not found, or failed)
    failed: list[bool]
    error: str | None = None


class Lookup:
    """One lookup of a dagger: its cache, its source (made on first use) and its metrics."""

    def __init__(
        self,
        spec: LookupSpec,
        name: str,
        source: Source | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.name = name
        self.columns = spec.key_columns()
        self.outputs = spec.outputs()
        self._steps = {c: parse_path(o.path) for c, o in self.outputs.items()}
        self._source = source
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()  # the metrics, counted from the request threads
        self._first_error: str | None = None  # the first request of the batch that failed after its retries
        self._cache = TtlCache(spec.cache_size, spec.cache_ttl_s, timer) if spec.cache_size else None
        self.metrics = LookupMetrics(lookup_type=spec.type)

    @property
    def source(self) -> Source:
        """The lookup's source, made on first use (EnrichError when its package is missing)."""
        if self._source is None:
            self._source = make_source(self.spec)
        return self._source

    def fields(self) -> list[pa.Field]:
        """Return the columns this lookup adds, typed."""
        return [pa.field(c, ARROW_TYPES[o.type]) for c, o in self.outputs.items()]

    # ---- asking ------------------------------------------------------------------------------

    def _request(self, keys: Sequence[Key], broken: threading.Event) -> list[Any] | FetchError:
        """Return the source's answers for ``keys``, or the FetchError of the last attempt. Once a request of the
        batch has failed after its retries (``broken``), the batch's other requests are not sent: a server that
        is down or does not answer fails a batch in one round of timeouts, not one per request."""
        for attempt in range(self.spec.retries + 1):
            if broken.is_set():
                return FetchError(f"not sent: another request of the batch failed ({self._first_error})")
            with self._lock:
                self.metrics.requests += 1
            try:
                return self.source.fetch(keys)
            except Exception as exc:  # a client's own error (a value it cannot send) fails the request too
                if not isinstance(exc, FetchError):
                    exc = FetchError(
                        f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                    )
                if attempt == self.spec.retries:
                    with self._lock:
                        self._first_error = self._first_error or str(exc)
                    broken.set()
                    return exc
                with self._lock:
                    self.metrics.retries += 1
                time.sleep(RETRY_WAIT_S * 2**attempt)
        raise AssertionError("unreachable")

    def _values(self, documents: list[Any]) -> list[tuple[Any, ...]]:
        """Return each document's output values (one tuple a document), column by column."""
        columns = []
        for column, output in self.outputs.items():
            values, bad = column_values(documents, self._steps[column], output.type)
            self.metrics.bad_values += bad
            columns.append(values)
        return list(zip(*columns, strict=True)) if columns else [() for _ in documents]

    def answers(self, keys: list[Key]) -> _Answers:
        """Return the answers for ``keys`` (distinct): from the cache, else from the source in requests of up
        to ``max_keys_per_request``, ``capacity`` at once. Found and not-found answers go in the cache."""
        result = _Answers(values=[None] * len(keys), failed=[False] * len(keys))
        todo: list[int] = []
        held = self._cache.get_many(keys) if self._cache is not None else [ABSENT] * len(keys)
        for i, value in enumerate(held):
            if value is ABSENT:
                todo.append(i)
            else:
                result.values[i] = value
        self.metrics.cache_hits += len(keys) - len(todo)
        self.metrics.keys += len(keys)
        self.metrics.fetched += len(todo)
        if not todo:
            return result
        size = self.source.request_size
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
        broken = threading.Event()
        self._first_error = None
        if len(chunks) == 1:
            replies = [self._request([keys[i] for i in chunks[0]], broken)]
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.spec.capacity, thread_name_prefix=f"lookup-{self.name}"
                )
            replies = list(
                self._pool.map(lambda chunk: self._request([keys[i] for i in chunk], broken), chunks)
            )
        for chunk, reply in zip(chunks, replies, strict=True):
            if isinstance(reply, FetchError):
                self.metrics.errors += len(chunk)
                result.error = self._first_error or str(reply)
                for i in chunk:
                    result.failed[i] = True
                continue
            found = [(i, d) for i, d in zip(chunk, reply, strict=True) if d is not MISSING]
            self.metrics.found += len(found)
            self.metrics.not_found += len(chunk) - len(found)
            for (i, _), value in zip(found, self._values([d for _, d in found]), strict=True):
                result.values[i] = value
            if self._cache is not None:
                self._cache.put_many([keys[i] for i in chunk], [result.values[i] for i in chunk])
        if result.error:
            self.metrics.last_error = result.error
        return result

    # ---- enriching ---------------------------------------------------------------------------

    def _from_kept(self, keys: list[Key], kept: pa.Table) -> _Answers:
        """Return the answers kept for a replayed batch; keys it does not hold (none, on an exact replay) are
        asked as usual."""
        key_lists = [kept.column(c).to_pylist() for c in self.columns]
        outputs = [kept.column(c).to_pylist() for c in self.outputs]
        found, failed = kept.column(FOUND).to_pylist(), kept.column(FAILED).to_pylist()
        held = (
            {
                key: (tuple(o[j] for o in outputs) if found[j] else None, failed[j])
                for j, key in enumerate(zip(*key_lists, strict=True))
            }
            if key_lists
            else {}
        )
        missing = [k for k in keys if k not in held]
        fresh = self.answers(missing) if missing else None
        extra = dict(zip(missing, zip(fresh.values, fresh.failed, strict=True), strict=True)) if fresh else {}
        pairs = [held[k] if k in held else extra[k] for k in keys]
        return _Answers(
            values=[p[0] for p in pairs], failed=[p[1] for p in pairs], error=fresh.error if fresh else None
        )

    def enrich(self, table: pa.Table, kept: pa.Table | None = None) -> tuple[pa.Table, pa.Table]:
        """Return ``table`` with this lookup's columns added (same rows, same order) and the answers to keep
        for a replay (one row per distinct key). With ``kept`` (a replay), its answers are used.

        Raises EnrichError when a request failed and ``fail_on_errors`` is true."""
        started = time.perf_counter()
        keys, index = distinct_keys(table, self.columns)
        if kept is not None:
            self.metrics.replayed_batches += 1
            answers = self._from_kept(keys, kept)
        else:
            answers = self.answers(keys)
        failed_rows = int(pc.sum(spread(pa.array(answers.failed, pa.bool_()), index)).as_py() or 0)
        if failed_rows and self.spec.fail_on_errors:
            self.metrics.last_error = answers.error
            raise EnrichError(
                f"lookup {self.name!r} ({self.source.target}) failed for {sum(answers.failed)} of {len(keys)} keys: "
                f"{answers.error}",
                hint="check that the server is up and answers in time (timeout_s); with fail_on_errors: false the "
                "rows are written with NULL in its columns, and counted",
            )
        columns = [
            pa.array([v[j] if v is not None else None for v in answers.values], f.type)
            for j, f in enumerate(self.fields())
        ]
        out = table
        for f, values in zip(self.fields(), columns, strict=True):
            out = out.append_column(f, spread(values, index))
        found = pa.array([v is not None for v in answers.values], pa.bool_())
        keyed = int(pc.sum(pc.is_valid(index)).as_py() or 0)
        m = self.metrics
        m.batches += 1
        m.rows += table.num_rows
        m.rows_without_key += table.num_rows - keyed
        m.rows_with_errors += failed_rows
        m.rows_not_found += keyed - failed_rows - int(pc.sum(spread(found, index)).as_py() or 0)
        if self._source is not None:
            m.target = self._source.target
        kept_out = pa.table(
            [pa.array([k[i] for k in keys], table.schema.field(c).type) for i, c in enumerate(self.columns)]
            + columns
            + [found, pa.array(answers.failed, pa.bool_())],
            names=[*self.columns, *self.outputs, FOUND, FAILED],
        )
        elapsed = (time.perf_counter() - started) * 1000
        m.last_ms, m.max_ms, m.total_ms = elapsed, max(m.max_ms, elapsed), m.total_ms + elapsed
        return out, kept_out

    def close(self) -> None:
        """Stop the request threads and close the source's connections."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._source is not None:
            self._source.close()


class Enricher:
    """A dagger's lookups, applied in order to each micro-batch (see the module's docstring)."""

    def __init__(
        self,
        specs: Sequence[LookupSpec],
        store: ReplayStore | None = None,
        sources: dict[str, Source] | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self.specs = list(specs)
        self.store = store
        self.lookups = [
            Lookup(spec, name, (sources or {}).get(name), timer)
            for spec, name in zip(self.specs, lookup_names(self.specs), strict=True)
        ]

    def bind(self, schema: pa.Schema) -> pa.Schema:
        """Return the schema of the enriched rows, given the SQL's result ``schema``.

        Raises SpecError naming the lookup and the column a key needs that the rows lack, or a new column
        that is there already."""
        check_lookups(self.specs, list(schema.names))
        for lookup in self.lookups:
            for f in lookup.fields():
                schema = schema.append(f)
        return schema

    def enrich(self, table: pa.Table, batch_id: int) -> pa.Table:
        """Return ``table`` enriched by every lookup in order (a replayed ``batch_id``: with the answers it was
        enriched with before). Raises EnrichError (a lookup with fail_on_errors failed)."""
        store = self.store if table.num_rows else None  # an empty batch has nothing to replay
        kept = store.load(batch_id) if store is not None else None
        answers: dict[str, pa.Table] = {}
        for lookup in self.lookups:
            table, answers[lookup.name] = lookup.enrich(table, kept.get(lookup.name) if kept else None)
        if store is not None:
            store.save(batch_id, answers)
        return table

    def metrics(self) -> dict[str, dict[str, object]]:
        """Return each lookup's metrics by name."""
        return {lookup.name: lookup.metrics.to_dict() for lookup in self.lookups}

    def close(self) -> None:
        """Close every lookup's source."""
        for lookup in self.lookups:
            lookup.close()
