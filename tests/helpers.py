"""Ground truth for integration tests, computed independently of the engine (s2sphere, plain Python)."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import s2sphere

from job.spec import DaggerSpec, parse_spec

BOOKINGS_SQL = """SELECT city_id AS tag_city_id,
       S2Id(pickup_lat, pickup_long, 13) AS tag_s2id,
       vehicle_type AS tag_vehicle_type,
       count(1) AS num_of_bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM `data_stream`
WHERE status = 'COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id, S2Id(pickup_lat, pickup_long, 13), vehicle_type"""

DRIVERS_SQL = """SELECT S2Id(lat, long, 13) AS tag_s2id,
       driver_status AS tag_driver_status,
       DistinctCount(driver_id) AS drivers,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), S2Id(lat, long, 13), driver_status"""

T = TypeVar("T")


def wait_until(
    what: str,
    check: Callable[[], T],
    timeout_s: float,
    *,
    every_s: float = 0.5,
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
    tail_chars: int = 3000,
) -> T:
    """Call ``check`` every ``every_s`` seconds until it returns a truthy value; return that value.

    ``check`` is always called at least once, and once more after the deadline (``timeout_s`` from the
    call) has passed, so a last poll that was slow still counts.

    Raises AssertionError naming ``what``:

    - if ``proc`` is given and has exited (``proc.poll()`` is not None) before ``check`` held: with its
      exit code and the last ``tail_chars`` of ``log``. Its exit is looked at before each call of
      ``check``, so a process that did what was waited for and then exited does not fail the wait;
    - on timeout: ``timed out after <timeout_s> s waiting for <what>``, followed by the last
      ``tail_chars`` of ``log`` if that file exists.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        expired = time.monotonic() >= deadline
        exit_code = proc.poll() if proc is not None else None
        value = check()
        if value:
            return value
        if exit_code is not None:
            raise AssertionError(
                f"the process exited ({exit_code}) while waiting for {what}" + _log_tail(log, tail_chars)
            )
        if expired:
            raise AssertionError(
                f"timed out after {timeout_s:.0f} s waiting for {what}" + _log_tail(log, tail_chars)
            )
        time.sleep(max(0.0, min(every_s, deadline - time.monotonic())))


def _log_tail(log: Path | None, chars: int) -> str:
    """A newline and the last ``chars`` characters of ``log``; "" when there is no such file."""
    if log is None or not log.is_file():
        return ""
    return "\n" + log.read_text(errors="replace")[-chars:]


def reusable_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that the OS confirms free (each is bound once), drawn at random from
    below the kernel's ephemeral range (32768+).

    For a test that stops a server and starts it again on the same port: a port from the ephemeral range
    (what binding port 0 gives) can be taken in between as the local port of any outgoing connection on
    the machine, which made such restarts fail now and then with "port ... already in use".
    """
    rng = random.SystemRandom()
    chosen: list[int] = []
    while len(chosen) < count:
        port = rng.randrange(20000, 32768)
        if port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        chosen.append(port)
    return chosen


def s2_signed(lat: float, lng: float, level: int = 13) -> str:
    """The signed decimal S2 cell id, computed with s2sphere (the reference implementation)."""
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return str(cid - (1 << 64) if cid >= 1 << 63 else cid)


def window_end_s(micros: int, size_s: int = 60) -> int:
    return (micros // 1_000_000 // size_s) * size_s + size_s


def offset_log(checkpoint: Path) -> list[Path]:
    """Return the files of a dagger's Spark offset log (``<checkpoint>/spark/offsets``), oldest batch first."""
    return sorted((checkpoint / "spark" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))


def offset_log_conf(offset_file: Path) -> dict[str, str]:
    """Return the SQL settings an offset log entry fixes for its checkpoint (its metadata line's conf)."""
    from job.query.offset_log import batch_metadata

    return dict((batch_metadata(offset_file.parent.parent, int(offset_file.name)) or {})["conf"])


def expected_bookings(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str, str, str], int]:
    """(window end s, city_id, s2id, vehicle_type) -> completed bookings."""
    out: Counter[tuple[int, str, str, str]] = Counter()
    for r in rows:
        if r["status"] != "COMPLETED":
            continue
        key = (
            window_end_s(micros_of(r["event_timestamp"])),
            str(r["city_id"]),
            s2_signed(r["pickup_lat"], r["pickup_long"]),
            r["vehicle_type"],
        )
        out[key] += 1
    return dict(out)


def expected_drivers(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, str, str], int]:
    """(window end s, s2id, driver_status) -> distinct drivers."""
    sets: dict[tuple[int, str, str], set[str]] = defaultdict(set)
    for r in rows:
        sets[
            (
                window_end_s(micros_of(r["event_timestamp"])),
                s2_signed(r["lat"], r["long"]),
                r["driver_status"],
            )
        ].add(r["driver_id"])
    return {k: len(v) for k, v in sets.items()}


def micros_of(value: Any) -> int:
    return int(value.timestamp() * 1_000_000) if hasattr(value, "timestamp") else int(value)


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def influx_points(influx: Any, db: str, measurement: str, field: str, tags: list[str]) -> dict[tuple, int]:
    """Read every point of ``measurement`` back with InfluxQL: (time s, *tags) -> field value."""
    import requests

    resp = requests.get(
        f"{influx.url}/query",
        params={"db": db, "epoch": "s", "q": f'SELECT * FROM "{measurement}"'},
        timeout=30,
    )
    resp.raise_for_status()
    out: dict[tuple, int] = {}
    for result in resp.json().get("results", []):
        for series in result.get("series", []) or []:
            cols = series["columns"]
            for values in series["values"]:
                row = dict(zip(cols, values, strict=True))
                out[(row["time"], *[row[t] for t in tags])] = row[field]
    return out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_and_db(broker: Any, influx: Any, prefix: str, partitions: int) -> tuple[str, str]:
    """Create a fresh topic (``partitions`` partitions) on ``broker`` (a BrokerHandle) and a fresh database
    on ``influx``; return their names."""
    topic, db = unique(prefix), unique("db").replace("-", "_")
    broker.create_topic(topic, partitions=partitions)
    influx.create_database(db)
    return topic, db


def streams_yaml(name: str, bootstrap: str, streams: list[tuple[str, str, str]], extra: str = "") -> str:
    """Return the ``streams:`` entries of a spec for (table, topic, proto_class) triples, each reading
    ``event_timestamp`` with the consumer group ``<name>-<table>``; ``extra`` lines are added to each."""
    return "".join(
        f"""  - table: {table}
    topics: [{topic}]
    proto_class: {proto}
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: {name}-{table}
{extra}"""
        for table, topic, proto in streams
    )


def booking_spec(
    name: str,
    *,
    topic: str = "booking-log",
    table: str = "data_stream",
    bootstrap: str = "127.0.0.1:9092",
    group: str | None = None,
    stream: str = "",
    sql: str = "SELECT 1",
    settings: str = "",
    sink: str = "sink:\n  type: log\n",
) -> str:
    """Return the YAML of a one-stream dagger over BookingLog events (the tests' and benchmarks' usual spec).

    ``group`` defaults to ``name``; ``stream`` adds settings to the stream (lines indented by four spaces);
    ``sql`` is written on its line when YAML reads it as it is, else as a block; ``settings`` are top-level
    lines after the SQL, and ``sink`` ends the spec (``sink:`` or ``sinks:`` and what they hold)."""
    plain = "\n" not in sql and ": " not in sql and " #" not in sql and sql[:1].isalpha()
    body = sql if plain else "|\n" + "\n".join("  " + line for line in sql.splitlines())
    return (
        f"name: {name}\nstreams:\n  - table: {table}\n    topics: [{topic}]\n"
        "    proto_class: daggers.events.BookingLog\n    timestamp_field: event_timestamp\n"
        f"    bootstrap_servers: {bootstrap}\n    group: {group if group is not None else name}\n{stream}"
        f"sql: {body}\n{settings}{sink}"
    )


def make_spec(
    *,
    name: str,
    bootstrap: str,
    topic: str,
    proto_class: str,
    sql: str,
    influx_url: str,
    db: str,
    measurement: str,
    checkpoint: Path,
    watermark_delay_ms: int = 30_000,
    max_records_per_batch: int = 500_000,
    bad_records: str = "skip",
    trigger_interval_s: float = 1.0,
    sink_extra: str = "",
) -> tuple[DaggerSpec, str]:
    """Return a spec and its YAML text (``sink_extra``: more settings of the sink, one ``key: value`` a line)."""
    sql_block = "\n".join("  " + line for line in sql.splitlines())
    text = f"""name: {name}
streams:
  - table: data_stream
    topics: [{topic}]
    proto_class: {proto_class}
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: {name}
    start_from: earliest
    bad_records: {bad_records}
    max_records_per_batch: {max_records_per_batch}
sql: |
{sql_block}
watermark_delay_ms: {watermark_delay_ms}
parallelism: 2
checkpoint_dir: {checkpoint}
trigger_interval_s: {trigger_interval_s}
sink:
  type: influx
  url: {influx_url}
  database: {db}
  measurement: {measurement}
""" + "".join(f"  {line}\n" for line in sink_extra.splitlines() if line.strip())
    return parse_spec(text, f"{name}.yaml"), text


def bookings_to_influx(
    prefix: str, bootstrap: str, topic: str, influx_url: str, db: str, checkpoint: Path, **kw: Any
) -> tuple[DaggerSpec, str]:
    """The spec (and its YAML) of :data:`BOOKINGS_SQL` (or ``kw``'s ``sql``) over BookingLog events of ``topic``
    into measurement ``m`` of ``db`` (a name from ``prefix``; ``kw`` go to :func:`make_spec`)."""
    kw.setdefault("sql", BOOKINGS_SQL)
    return make_spec(
        name=unique(prefix),
        bootstrap=bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        influx_url=influx_url,
        db=db,
        measurement="m",
        checkpoint=checkpoint,
        **kw,
    )


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``root`` over HTTP on 127.0.0.1 at a port the OS picks; yield (base URL, the request
    paths so far). The server stops when the block ends."""
    import functools
    import http.server
    import threading

    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            requests.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


#: A dagger's ``spark_conf`` on the ``spark_cluster`` fixture: one executor of 1 core and 512 MiB on each
#: worker; tasks are scheduled only once both have registered.
CLUSTER_CONF = {
    "spark.cores.max": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "180s",
}


def on_cluster(spec_text: str) -> str:
    """Return the spec ``spec_text`` (without a ``spark_conf``) with :data:`CLUSTER_CONF` as its ``spark_conf``."""
    return spec_text + "spark_conf:\n" + "".join(f'  {k}: "{v}"\n' for k, v in CLUSTER_CONF.items())


def send_one(
    producer: Any, topic: str, value: bytes, key: bytes | None, partition: int, timestamp: int
) -> None:
    """Hand one record to a confluent-kafka ``producer`` for ``partition`` of ``topic``, stamped ``timestamp``
    (epoch ms), waiting while its local queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, partition=partition, timestamp=timestamp)
            return
        except BufferError:
            producer.poll(0.05)


def produce_step(bootstrap: str, topic: str, k: int, n: int, seed: int, start: Any) -> list[dict[str, Any]]:
    """Produce ``n`` bookings over three minutes from ``start`` + 20·k minutes, then one event ten minutes
    after that, which closes their windows; return the rows produced (for the expected windows).

    A running query may read the step while it is being written. Spark's watermark is the newest event
    time seen on any partition, so a query that saw one partition's share of the step before another's
    would drop the other's older events as late: the events go in slices of :data:`STEP_SLICE_S` of
    event time, each acknowledged before the next is sent (no partition is ever further ahead than one
    slice, less than a dagger's watermark delay), and the closer after all of them."""
    from datetime import timedelta

    from job.produce.generator import generate

    batch = generate(
        "booking",
        n,
        seed=seed + 2 * k,
        start=start + timedelta(minutes=20 * k),
        duration_s=180,
        first_index=10_000 * k,
    )
    closer = generate(
        "booking",
        1,
        seed=seed + 2 * k + 1,
        start=start + timedelta(minutes=20 * k + 10),
        duration_s=1,
        first_index=10_000 * k + 9_999,
    )
    produce_in_time_slices(bootstrap, topic, [batch, closer])
    return batch.table.to_pylist() + closer.table.to_pylist()


#: The event time one acknowledged slice of :func:`produce_in_time_slices` spans (the specs' watermark
#: delay is 30 s).
STEP_SLICE_S = 10.0


def produce_in_time_slices(
    bootstrap: str, topic: str, batches: list[Any], slice_s: float = STEP_SLICE_S
) -> None:
    """Send the events of ``batches`` (EventBatch, in order) as ``daggers produce`` does, each slice of
    ``slice_s`` of event time acknowledged before the next goes (``produce(..., ack_every_s=)``).
    Raises ProduceError on a failed delivery."""
    from job.produce.producer import produce

    produce(bootstrap, topic, batches, progress=False, ack_every_s=slice_s)


def live_feed(bootstrap: str, topic: str, sent: Counter, stop: threading.Event) -> None:
    """Until ``stop``, send 10 bookings every 50 ms stamped with the time they are sent; count them per 2-s
    window end in ``sent`` (a live producer for tests that need batches to keep coming)."""
    from job.produce.generator import generate
    from job.produce.producer import produce

    def batches():  # type: ignore[no-untyped-def]
        index = 0
        while not stop.is_set():
            # one world of 10 drivers (cached): at 10 events in 1 ms the default is a new world of 50,000
            # drivers per batch, 32 ms of CPU each (~0.4 core for the feed); with it, 1.4 ms
            batch = generate(
                "booking",
                10,
                seed=0,
                start=datetime.now(UTC),
                duration_s=0.001,
                drivers=10,
                first_index=index,
            )
            for ts in batch.table.column("event_timestamp").to_pylist():
                sent[(int(ts.timestamp()) // 2 + 1) * 2] += 1
            yield batch
            index += 10
            time.sleep(0.05)

    produce(bootstrap, topic, batches(), progress=False, producer_config={"linger.ms": 5})


class FakeClock:
    """A clock for unit tests that only :meth:`sleep` (or setting ``now``) moves: call it, or use
    :meth:`monotonic`, where code takes ``time.time`` or ``time.monotonic``."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def committed_checkpoint(folder: Path, positions: dict[str, dict[str, int]], batch: int = 0) -> Path:
    """A query checkpoint ``folder`` whose committed batch ``batch`` planned ``positions`` (topic -> partition ->
    next offset), as Spark's offset and commit logs hold it."""
    import json

    spark = folder / "spark"
    (spark / "offsets").mkdir(parents=True, exist_ok=True)
    (spark / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    (spark / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(positions)}\n")
    (spark / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return folder
