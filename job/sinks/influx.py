"""The InfluxDB sink, over the v1 API (``/write``, InfluxDB 1.x) or the v2 API (``/api/v2/write``,
InfluxDB 1.8+, 2.x, 3.x, and servers that accept it such as VictoriaMetrics).

Writes are idempotent: a point is keyed by measurement, tags and time, so writing a replayed
window again overwrites it with the same values.

A failed write is retried with exponential back-off (connection errors, 5xx, 429); a 4xx that
retrying cannot fix (missing database, bad points, no permission) fails at once with InfluxDB's
own message. Passwords and tokens are never put in logs or error messages.
"""

from __future__ import annotations

import logging
import random
import time

import pyarrow as pa
import requests

from job.errors import BackpressureError, SinkError
from job.sinks.base import Sink
from job.sinks.line_protocol import encode
from job.spec import InfluxSinkSpec

log = logging.getLogger("daggers.sink.influx")


class InfluxSink(Sink):
    """Writes rows as points. See :mod:`job.sinks.line_protocol` for the row → point mapping."""

    name = "influx"

    def __init__(self, spec: InfluxSinkSpec, session: requests.Session | None = None,
                 sleep: callable = time.sleep) -> None:  # type: ignore[valid-type]
        super().__init__()
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.http = session or requests.Session()
        self._sleep = sleep
        if spec.api == "v1" and spec.username:
            self.http.auth = (spec.username, spec.password.get_secret_value() if spec.password else "")
        if spec.api == "v2" and spec.token:
            self.http.headers["Authorization"] = f"Token {spec.token.get_secret_value()}"

    def __repr__(self) -> str:
        target = self.spec.database if self.spec.api == "v1" else self.spec.bucket
        return f"InfluxSink({self.url}, api={self.spec.api}, target={target}, measurement={self.spec.measurement})"

    # ---- open ---------------------------------------------------------------------------------

    def open(self) -> None:
        try:
            ping = self.http.get(f"{self.url}/ping", timeout=5)
        except requests.RequestException as exc:
            raise SinkError(f"InfluxDB at {self.url} is unreachable: {type(exc).__name__}") from None
        if ping.status_code not in (200, 204):
            raise SinkError(f"InfluxDB at {self.url} answered /ping with HTTP {ping.status_code}")
        if self.spec.api == "v1":
            self._check_database()

    def _query(self, q: str, method: str = "GET") -> dict:
        resp = self.http.request(method, f"{self.url}/query", params={"q": q}, timeout=10)
        if resp.status_code == 401 or resp.status_code == 403:
            raise SinkError(f"InfluxDB at {self.url} refused the credentials (HTTP {resp.status_code})")
        if resp.status_code >= 400:
            raise SinkError(f"InfluxDB query failed (HTTP {resp.status_code}): {resp.text.strip()[:300]}")
        return resp.json()

    def _check_database(self) -> None:
        db = self.spec.database or ""
        result = self._query("SHOW DATABASES")
        series = (result.get("results") or [{}])[0].get("series") or [{}]
        names = {row[0] for row in series[0].get("values") or []}
        if db in names:
            return
        if self.spec.create_database:
            self._query(f'CREATE DATABASE "{db}"', method="POST")
            return
        raise SinkError(f"InfluxDB database {db!r} does not exist at {self.url}",
                        hint="create it (CREATE DATABASE), or set create_database: true on the sink")

    # ---- write --------------------------------------------------------------------------------

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        encoded = encode(table, self.spec.measurement)
        self.metrics.rows_skipped += encoded.skipped
        size = self.spec.batch_size
        for start in range(0, len(encoded.lines), size):
            body = "\n".join(encoded.lines[start:start + size]).encode()
            self._post_with_retry(body, encoded.precision)
        return len(encoded.lines)

    def _endpoint(self, precision: str) -> tuple[str, dict[str, str]]:
        if self.spec.api == "v1":
            params = {"db": self.spec.database or "", "precision": precision}
            if self.spec.retention_policy:
                params["rp"] = self.spec.retention_policy
            return f"{self.url}/write", params
        v2_precision = {"s": "s", "ms": "ms", "u": "us"}[precision]
        return f"{self.url}/api/v2/write", {"bucket": self.spec.bucket or "", "org": self.spec.org or "",
                                           "precision": v2_precision}

    def _post_with_retry(self, body: bytes, precision: str) -> None:
        url, params = self._endpoint(precision)
        attempt = 0
        while True:
            try:
                self._post(url, params, body)
                return
            except BackpressureError as exc:
                delay = exc.retry_after
                error: SinkError = exc
            except _Retryable as exc:
                delay = min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random())
                error = SinkError(str(exc))
            attempt += 1
            if attempt > self.spec.max_retries:
                raise SinkError(f"giving up writing to InfluxDB at {self.url} after {attempt} attempts: "
                                f"{error.message}") from None
            self.metrics.retries += 1
            log.warning("InfluxDB write failed (%s); retry %d/%d in %.1fs", error.message, attempt,
                        self.spec.max_retries, delay)
            self._sleep(delay)

    def _post(self, url: str, params: dict[str, str], body: bytes) -> None:
        try:
            resp = self.http.post(url, params=params, data=body, timeout=30,
                                  headers={"Content-Type": "text/plain; charset=utf-8"})
        except requests.RequestException as exc:
            raise _Retryable(f"cannot reach {self.url}: {type(exc).__name__}") from None
        if resp.status_code in (200, 204):
            return
        text = _error_text(resp)
        if resp.status_code in (429, 503):
            retry_after = float(resp.headers.get("Retry-After", "1") or 1)
            raise BackpressureError(f"InfluxDB is overloaded (HTTP {resp.status_code}): {text}", retry_after)
        if resp.status_code >= 500:
            raise _Retryable(f"HTTP {resp.status_code}: {text}")
        if resp.status_code == 404 and "database not found" in text:
            raise SinkError(f"InfluxDB database {self.spec.database!r} does not exist at {self.url}",
                            hint="create it, or set create_database: true on the sink")
        if resp.status_code in (401, 403):
            raise SinkError(f"InfluxDB at {self.url} refused the write (HTTP {resp.status_code}): {text}")
        raise SinkError(f"InfluxDB rejected the points (HTTP {resp.status_code}): {text}")


class _Retryable(Exception):
    """A write failure that another attempt may fix."""


def _error_text(resp: requests.Response) -> str:
    try:
        return str(resp.json().get("error") or resp.json().get("message") or resp.text).strip()[:300]
    except ValueError:
        return resp.text.strip()[:300]
