"""The InfluxDB sink, over the v1 API (``/write``, InfluxDB 1.x) or the v2 API (``/api/v2/write``,
InfluxDB 1.8+, 2.x, 3.x, and servers that accept it such as VictoriaMetrics).

Writes are idempotent: a point is keyed by measurement, tags and time, so writing a replayed
window again overwrites it with the same values.

A failed write is retried with exponential back-off (connection errors, 5xx, 429); a 4xx that
retrying cannot fix (missing database, bad points, no permission) fails at once with InfluxDB's
own message. Passwords and tokens are never put in logs or error messages.

A batch's points go in bodies of ``batch_size`` lines, ``write_concurrency`` of them at once; the
batch counts as written once every body is (a failure fails the batch, which Spark then replays).

``api: v1`` posts line protocol to ``/write`` with requests. ``api: v2`` uses ``influxdb-client``'s
write API in synchronous mode (its batching mode does not raise errors: they only reach a callback,
which would drop points silently); the token lives only in that client's ``Authorization`` header,
which is never logged (the client's HTTP debug log stays off). Both send the same line protocol,
with the precision (s, ms or us) that holds the batch's timestamps exactly.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import pyarrow as pa
import requests

from job.common.optional import require
from job.common.words import counted
from job.errors import BackpressureError, SinkError
from job.sinks.base import Sink, SinkUnreachable, backoff_s
from job.sinks.line_protocol import encode
from job.spec import InfluxSinkSpec

log = logging.getLogger("daggers.sink.influx")


class InfluxSink(Sink):
    """Writes rows as points. See :mod:`job.sinks.line_protocol` for the row → point mapping."""

    name = "influx"

    def __init__(
        self,
        spec: InfluxSinkSpec,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.url = spec.url.rstrip("/")
        self.http = session or requests.Session()
        self._sleep = sleep
        if spec.api == "v1" and spec.username:
            self.http.auth = (spec.username, spec.password.get_secret_value() if spec.password else "")
        self._client: Any = None  # influxdb_client.InfluxDBClient for api v2, made in open()
        self._write_api: Any = None
        self._pool: ThreadPoolExecutor | None = None  # concurrent writes of one batch's bodies

    @property
    def target(self) -> str:
        where = f"database {self.spec.database}" if self.spec.api == "v1" else f"bucket {self.spec.bucket}"
        return f"measurement {self.spec.measurement} in {where} at {self.url}"

    def __repr__(self) -> str:
        target = self.spec.database if self.spec.api == "v1" else self.spec.bucket
        return f"InfluxSink({self.url}, api={self.spec.api}, target={target}, measurement={self.spec.measurement})"

    # ---- open ---------------------------------------------------------------------------------

    def open(self) -> None:
        try:
            ping = self.http.get(f"{self.url}/ping", timeout=5)
        except requests.RequestException as exc:
            raise SinkUnreachable(
                f"InfluxDB at {self.url} is unreachable: {type(exc).__name__}",
                hint="start the local stack with `daggers up`, or set the sink's url to your InfluxDB",
            ) from None
        if ping.status_code >= 500:
            raise SinkUnreachable(f"InfluxDB at {self.url} answered /ping with HTTP {ping.status_code}")
        if ping.status_code not in (200, 204):
            raise SinkError(f"InfluxDB at {self.url} answered /ping with HTTP {ping.status_code}")
        if self.spec.api == "v1":
            self._check_database()
        else:
            version = ping.headers.get("X-Influxdb-Version", "")
            if _older_than_1_8(version):
                raise SinkError(
                    f"InfluxDB {version} at {self.url} has no v2 write API (it came with 1.8)",
                    hint="use api: v1 with database, or upgrade the server",
                )
            self._open_v2()

    def _open_v2(self) -> None:
        """Create the v2 client and check the token and bucket where the server has a buckets API.

        Servers without one (InfluxDB 1.8, VictoriaMetrics) answer 400/404 and are not checked further.
        """
        require("influxdb_client", "influx2", needed_by="an influx sink with api: v2")
        from influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS
        from influxdb_client.rest import ApiException

        token = self.spec.token.get_secret_value() if self.spec.token else ""
        self._client = InfluxDBClient(
            url=self.url,
            token=token,
            org=self.spec.org or "",
            timeout=int(self.spec.timeout_s * 1000),
            debug=False,
        )
        self._write_api = self._client.write_api(write_options=SYNCHRONOUS)
        bucket = self.spec.bucket or ""
        try:
            found = self._client.buckets_api().find_bucket_by_name(bucket)
        except ApiException as exc:
            if exc.status in (401, 403):
                raise SinkError(
                    f"InfluxDB at {self.url} refused the token (HTTP {exc.status})",
                    hint="check token (and org) on the sink",
                ) from None
            log.debug("no buckets API at %s (HTTP %s); bucket %r not checked", self.url, exc.status, bucket)
            return
        except Exception as exc:  # urllib3 connection errors, unexpected bodies
            log.debug("bucket check at %s failed (%s); not checked", self.url, type(exc).__name__)
            return
        if found is None:
            raise SinkError(
                f"InfluxDB bucket {bucket!r} does not exist at {self.url}",
                hint="create it (influx bucket create), or fix bucket/org on the sink",
            )

    def _query(self, q: str, method: str = "GET") -> dict[str, Any]:
        try:
            resp = self.http.request(method, f"{self.url}/query", params={"q": q}, timeout=10)
        except requests.RequestException as exc:
            raise SinkUnreachable(f"InfluxDB at {self.url} is unreachable: {type(exc).__name__}") from None
        if resp.status_code >= 500:
            raise SinkUnreachable(
                f"InfluxDB query failed (HTTP {resp.status_code}): {resp.text.strip()[:300]}"
            )
        if resp.status_code == 401 or resp.status_code == 403:
            raise SinkError(f"InfluxDB at {self.url} refused the credentials (HTTP {resp.status_code})")
        if resp.status_code >= 400:
            raise SinkError(f"InfluxDB query failed (HTTP {resp.status_code}): {resp.text.strip()[:300]}")
        answer = resp.json()
        if not isinstance(answer, dict):
            raise SinkError(
                f"InfluxDB at {self.url} answered a query with a {type(answer).__name__}, not an object"
            )
        return answer

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
        raise SinkError(
            f"InfluxDB database {db!r} does not exist at {self.url}",
            hint="create it (CREATE DATABASE), or set create_database: true on the sink",
        )

    # ---- write --------------------------------------------------------------------------------

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        encoded = encode(table, self.spec.measurement)
        self.metrics.rows_skipped += encoded.skipped
        bodies = encoded.bodies(self.spec.batch_size)
        if self.spec.write_concurrency == 1 or len(encoded) <= self.spec.batch_size:
            for body in bodies:
                self._post_with_retry(body, encoded.precision)
            return len(encoded)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.spec.write_concurrency, thread_name_prefix="influx-write")
        futures = [self._pool.submit(self._post_with_retry, body, encoded.precision) for body in bodies]
        wait(futures)
        for future in futures:  # the first failure, in write order, once every write has ended
            future.result()
        return len(encoded)

    def _endpoint(self, precision: str) -> tuple[str, dict[str, str]]:
        if self.spec.api == "v1":
            params = {"db": self.spec.database or "", "precision": precision}
            if self.spec.retention_policy:
                params["rp"] = self.spec.retention_policy
            return f"{self.url}/write", params
        v2_precision = {"s": "s", "ms": "ms", "u": "us"}[precision]
        return f"{self.url}/api/v2/write", {
            "bucket": self.spec.bucket or "",
            "org": self.spec.org or "",
            "precision": v2_precision,
        }

    def _post_with_retry(self, body: bytes, precision: str) -> None:
        url, params = self._endpoint(precision)
        attempt = 0
        while True:
            try:
                if self.spec.api == "v2":
                    if self._write_api is None:
                        self._open_v2()
                    self._write_v2(body, precision)
                else:
                    self._post(url, params, body)
                return
            except BackpressureError as exc:
                delay = exc.retry_after
                error: SinkError = exc
            except _Retryable as exc:
                delay = backoff_s(attempt + 1, self.spec.max_backoff_s)
                error = SinkError(str(exc))
            attempt += 1
            if attempt > self.spec.max_retries:
                raise SinkError(
                    f"giving up writing to InfluxDB at {self.url} after {counted(attempt, 'attempt')}: "
                    f"{error.message}"
                ) from None
            self.metrics.retries += 1
            log.warning(
                "InfluxDB write failed (%s); retry %d/%d in %.1fs",
                error.message,
                attempt,
                self.spec.max_retries,
                delay,
            )
            self._retrying(attempt, self.spec.max_retries, delay, error.message)
            self._sleep(delay)

    def _post(self, url: str, params: dict[str, str], body: bytes) -> None:
        try:
            resp = self.http.post(
                url,
                params=params,
                data=body,
                timeout=self.spec.timeout_s,
                headers={"Content-Type": "text/plain; charset=utf-8"},
            )
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
            raise SinkError(
                f"InfluxDB database {self.spec.database!r} does not exist at {self.url}",
                hint="create it, or set create_database: true on the sink",
            )
        if resp.status_code in (401, 403):
            raise SinkError(f"InfluxDB at {self.url} refused the write (HTTP {resp.status_code}): {text}")
        raise SinkError(f"InfluxDB rejected the points (HTTP {resp.status_code}): {text}")

    def _write_v2(self, body: bytes, precision: str) -> None:
        """Write ``body`` with influxdb-client's synchronous write API; map its errors like :meth:`_post`."""
        from influxdb_client import WritePrecision
        from influxdb_client.rest import ApiException
        from urllib3.exceptions import HTTPError

        wp = {"s": WritePrecision.S, "ms": WritePrecision.MS, "u": WritePrecision.US}[precision]
        try:
            self._write_api.write(
                bucket=self.spec.bucket or "", org=self.spec.org or "", record=body, write_precision=wp
            )
        except ApiException as exc:
            status = int(exc.status or 0)
            text = _api_error_text(exc)
            if status in (429, 503):
                retry_after = float((exc.headers.get("Retry-After", "1") if exc.headers else "1") or 1)
                raise BackpressureError(
                    f"InfluxDB is overloaded (HTTP {status}): {text}", retry_after
                ) from None
            if status >= 500 or status == 0:
                raise _Retryable(f"HTTP {status}: {text}") from None
            if status in (401, 403):
                raise SinkError(f"InfluxDB at {self.url} refused the write (HTTP {status}): {text}") from None
            if status == 404:
                raise SinkError(
                    f"InfluxDB at {self.url} answered /api/v2/write with HTTP 404 (no bucket "
                    f"{self.spec.bucket!r} in org {self.spec.org!r}, or no v2 API): {text}",
                    hint="create the bucket, or fix bucket/org on the sink",
                ) from None
            raise SinkError(f"InfluxDB rejected the points (HTTP {status}): {text}") from None
        except HTTPError as exc:
            raise _Retryable(f"cannot reach {self.url}: {type(exc).__name__}") from None

    def close(self) -> None:
        """Close the v2 client, the write threads and the HTTP session."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = self._write_api = None
        self.http.close()


class _Retryable(Exception):
    """A write failure that another attempt may fix."""


def _error_text(resp: requests.Response) -> str:
    try:
        return str(resp.json().get("error") or resp.json().get("message") or resp.text).strip()[:300]
    except ValueError:
        return resp.text.strip()[:300]


def _api_error_text(exc: Any) -> str:
    """Return the server's message of an influxdb-client ApiException (never its request headers)."""
    body = exc.body if isinstance(exc.body, str) else (exc.body.decode(errors="replace") if exc.body else "")
    try:
        data = json.loads(body)
        return str(data.get("message") or data.get("error") or body).strip()[:300]
    except (ValueError, AttributeError):
        return (body or str(exc.reason or "")).strip()[:300]


def _older_than_1_8(version: str) -> bool:
    """True for an InfluxDB version string (``1.6.7``) before 1.8; False when unknown or newer."""
    match = re.match(r"v?(\d+)\.(\d+)", version.strip())
    return match is not None and (int(match.group(1)), int(match.group(2))) < (1, 8)
