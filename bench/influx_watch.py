"""When points reach InfluxDB, without asking it: a subscription sends every write to the benchmark.

InfluxDB 1.x forwards each write of a database to its subscriptions' destinations as it applies it
(``CREATE SUBSCRIPTION … DESTINATIONS ALL 'http://…'``). :class:`ArrivalWatch` is such a destination: an
HTTP server on 127.0.0.1 (a port from the OS) that stamps each write with the time it came and counts
its points by (measurement, time bucket). Counting the same points by polling InfluxDB
(``SELECT count(*) … GROUP BY time(…)`` every second) cost InfluxDB ~0.6 s a poll with 100 daggers' series,
more than a quarter of this 2-core machine taken from the daggers being measured; a forwarded write
costs it next to nothing, and its time is exact rather than a poll's.

A subscription is best effort: InfluxDB drops a write it cannot queue for its subscriptions (``/debug/vars``:
``write.subWriteDrop``, ``subscriber.writeFailures``). :attr:`ArrivalWatch.dropped` counts those over the
watch's life, so a window the watch did not see can be told from one InfluxDB does not have.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from job.stack.errors import StackError
from job.stack.influx import influx_query

#: (measurement, bucket start s) -> [(arrival time, points of the bucket so far)], one entry a write.
Arrivals = dict[tuple[str, int], list[tuple[float, int]]]


def bucketer(rules: tuple[tuple[str, str], ...]) -> Callable[[str], int | None]:
    """Return measurement -> bucket seconds (None: not counted) for ``rules`` of (InfluxQL regex as
    ``/…/``, bucket as ``60s``), the first that matches."""
    compiled = [(re.compile(regex.strip("/")), int(bucket.rstrip("s"))) for regex, bucket in rules]

    def of(name: str) -> int | None:
        return next((size for pattern, size in compiled if pattern.search(name)), None)

    return of


def count_lines(
    body: bytes, bucket_of: Callable[[str], int | None], precision_ns: int = 1
) -> dict[tuple[str, int], int]:
    """Return the points of a line-protocol ``body`` by (measurement, bucket start s); points without a
    timestamp, or of a measurement ``bucket_of`` leaves out, are not counted."""
    out: dict[tuple[str, int], int] = {}
    sizes: dict[str, int | None] = {}
    for raw in body.splitlines():
        line = raw.decode("utf-8", "replace")
        if not line or line.startswith("#"):
            continue
        name = re.split(r"(?<!\\)[, ]", line, maxsplit=1)[0].replace("\\", "")
        if name not in sizes:
            sizes[name] = bucket_of(name)
        size = sizes[name]
        stamp = line.rsplit(" ", 1)[-1]
        if size is None or not stamp.lstrip("-").isdigit():
            continue
        seconds = int(stamp) * precision_ns // 1_000_000_000
        key = (name, seconds // size * size)
        out[key] = out.get(key, 0) + 1
    return out


_PRECISION_NS = {"ns": 1, "n": 1, "u": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


class ArrivalWatch:
    """A subscription's destination that records when each bucket's points came (see the module docstring)."""

    def __init__(self, bucket_of: Callable[[str], int | None]) -> None:
        self.bucket_of = bucket_of
        self.arrivals: Arrivals = {}
        self.writes = 0
        self._totals: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="influx-watch", daemon=True)
        self._influx: tuple[str, str, str] | None = None
        self._drops0 = 0
        #: Writes InfluxDB did not forward to its subscriptions while this watch was subscribed (any
        #: subscription's: one watch at a time is what the benchmarks run); set by :meth:`stop`.
        self.dropped = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        watch = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                came = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                watch.record(came, body, _PRECISION_NS.get((params.get("precision") or ["ns"])[0], 1))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def record(self, came: float, body: bytes, precision_ns: int = 1) -> None:
        """Count a write's points as of ``came`` (what the server does with each write it gets)."""
        counts = count_lines(body, self.bucket_of, precision_ns)
        with self._lock:
            self.writes += 1
            for key, n in counts.items():
                self._totals[key] = self._totals.get(key, 0) + n
                self.arrivals.setdefault(key, []).append((came, self._totals[key]))

    def start(self, influx_url: str, database: str) -> None:
        """Serve, and subscribe to every write of ``database`` (its default retention policy)."""
        self._thread.start()
        name = f"bench_{uuid.uuid4().hex[:8]}"
        self._influx = (influx_url, database, name)
        self._drops0 = subscription_drops(influx_url)
        influx_query(
            influx_url,
            f'CREATE SUBSCRIPTION "{name}" ON "{database}"."autogen" DESTINATIONS ALL \'{self.url}\'',
            method="POST",
        )

    def stop(self) -> None:
        """Drop the subscription and stop serving."""
        if self._influx is not None:
            url, database, name = self._influx
            self.dropped = max(subscription_drops(url) - self._drops0, 0)
            with contextlib.suppress(StackError):  # InfluxDB already stopped
                influx_query(url, f'DROP SUBSCRIPTION "{name}" ON "{database}"."autogen"', method="POST")
            self._influx = None
        self._server.shutdown()
        self._server.server_close()


def subscription_drops(influx_url: str) -> int:
    """Return the writes InfluxDB 1.x has dropped for its subscriptions since it started (its queue to the
    subscriber service full, or a destination that failed): ``write.subWriteDrop`` plus
    ``subscriber.writeFailures`` of ``/debug/vars``; 0 when InfluxDB cannot be asked."""
    try:
        stats = requests.get(f"{influx_url}/debug/vars", timeout=10).json()
    except (requests.RequestException, ValueError):
        return 0
    values = {
        (v.get("name"), k): n
        for v in stats.values()
        if isinstance(v, dict)
        for k, n in (v.get("values") or {}).items()
    }
    return int(values.get(("write", "subWriteDrop"), 0)) + int(values.get(("subscriber", "writeFailures"), 0))
