"""Send generated events to a Kafka topic, at a steady rate or as fast as the broker takes them.

* confluent-kafka with ``acks=all``, idempotence, lz4, ``linger.ms=20`` and large batches (tansu 0.6
  and noida-db 0.2.3 both accept these); Java-compatible murmur2 partitioning of the key, so one
  driver (order, request) always lands in the same partition;
* the Kafka timestamp of a record is its event time in milliseconds (CreateTime);
* a token bucket holds ``rate`` events/s; a rich progress bar shows events and rate on stderr;
* every delivery error is counted and raised as :class:`ProduceError` after the final flush; none is
  dropped silently. The count of events delivered is of those the broker acknowledged; an event that timed
  out in flight is said to be "not acknowledged", never "not delivered": a broker that resumes may still write
  it (frozen for 2 s with ``message.timeout.ms`` 2000, 951 to 2,046 of 4,000 timed-out events were on the
  topic once it resumed, idempotent or not, tansu and noida-db alike);
* a broker that stops answering is waited for (``max_outage_s``, default 300 s): no event is acknowledged
  while events wait, so a line says ``broker not answering: waiting (63 s so far, up to 300 s)``; the events
  stay in the producer (its ``message.timeout.ms`` is longer than the wait) and go, in order, once the broker
  answers; the idempotent producer's retries write each once. After ``max_outage_s`` without an
  acknowledgement it fails with a :class:`ProduceError` saying how many were not delivered (before, a
  3-minute freeze ended it with 11,323 events timed out after librdkafka's 60 s).

Measured on the 2-core dev machine, 200,000 pre-generated events (55–101-byte payloads) to a new
4-partition topic, unthrottled, until every event was acknowledged: tansu 0.77–1.1M events/s,
noida-db 0.69–0.94M events/s (``delivery.report.only.error`` keeps Python callbacks off the hot
path). Throttled runs hold the rate within ~1% (2,000 events at 1,000/s took 2.0 s).
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from google.protobuf.empty_pb2 import Empty
from google.protobuf.message import DecodeError, Message
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from job.common.words import counted
from job.errors import DaggerError
from job.produce.generator import EventBatch

DEFAULT_PARTITIONS = 4
TOPIC_CONFIG = {"retention.ms": "-1"}  # noida-db deletes records older than 7 days otherwise
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 200_000,
    "message.timeout.ms": 60_000,
    "partitioner": "murmur2_random",
    "delivery.report.only.error": True,
}
METADATA_TIMEOUT_S = 10.0
MAX_ERROR_SAMPLES = 20
#: How long a broker may leave every queued event unacknowledged before it is said not to answer (a busy
#: machine may hold an acknowledgement for seconds), and how often the waiting line is repeated.
DEFAULT_MAX_OUTAGE_S = 300.0
OUTAGE_NOTICE_S = 10.0
OUTAGE_REPEAT_S = 30.0
#: What a message's timeout (librdkafka ``message.timeout.ms``) adds to ``max_outage_s``: an event queued
#: just before the broker stops must outlive the wait for it.
MESSAGE_TIMEOUT_MARGIN_S = 60.0

#: A wall-time limit lets the events due at it still go: at N events/s, the bucket releases the last of
#: N x S events exactly S seconds after the first.
DEADLINE_GRACE_S = 0.25
#: A fatal producer error (an idempotent producer whose sequence a restarted broker lost) is survived this many
#: times in a run: a new producer sends again the events not acknowledged (at most MAX_KEPT of them).
MAX_RECREATE = 3
MAX_KEPT = 1_000_000

_LOG = logging.getLogger("job.produce.kafka")
_LOG.addHandler(logging.NullHandler())  # librdkafka's own log lines; errors reach us through callbacks


class ProduceError(DaggerError):
    """Events could not be sent: unreachable broker, topic problems, or failed deliveries."""

    title = "Produce error"

    def __init__(self, message: str, *, hint: str | None = None, report: ProduceReport | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


@dataclass(frozen=True)
class ProduceReport:
    """What one :func:`produce` call did.

    ``count`` is the number of events the broker acknowledged, ``errors`` the number it did not;
    ``error_samples`` holds the first distinct reasons. ``interrupted`` is True when Ctrl-C ended it.
    """

    count: int
    seconds: float
    events_per_s: float
    errors: int = 0
    topic: str = ""
    error_samples: list[str] = field(default_factory=list)
    interrupted: bool = False
    #: With a wall-time limit that ended the sending first: how many events were asked for.
    asked: int | None = None
    deadline_s: float | None = None

    def summary(self) -> str:
        """Return a one-line summary for a terminal."""
        secs = f"{self.seconds:.2f}" if self.seconds < 10 else f"{self.seconds:.1f}"
        line = f"produced {counted(self.count, 'event', fmt=',')} to {self.topic!r} in {secs} s ({self.events_per_s:,.0f}/s)"
        if self.errors:
            line += f", {self.errors:,} failed"
        if self.deadline_s is not None:
            of = f" of {self.asked:,} asked" if self.asked is not None else ""
            line += f"; stopped at the {self.deadline_s:g}-s limit: {self.count:,}{of} sent"
        return line + (" (interrupted)" if self.interrupted else "")


# --------------------------------------------------------------------------- rate limit


class TokenBucket:
    """Allow ``rate`` events per second on average, in bursts of at most ``burst`` events.

    The bucket starts empty, so N events take N / rate seconds from the first one.
    """

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0 or not math.isfinite(rate):
            raise ProduceError(f"rate must be a positive number of events per second, not {rate}")
        self.rate, self.burst, self._clock = float(rate), max(1.0, float(burst)), clock
        self._tokens = 0.0
        self._last = clock()

    def delay(self, n: int) -> float:
        """Return the seconds to wait until ``n`` tokens are there (0.0 when they are)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        return max(0.0, (min(n, self.burst) - self._tokens) / self.rate)

    def take(self, n: int) -> None:
        """Spend ``n`` tokens (the balance may go negative for a chunk larger than a burst)."""
        self._tokens -= n


def chunk_size(rate: float | None) -> int:
    """Return how many events to send between rate checks and progress updates."""
    return 2_000 if rate is None else int(max(1, min(2_000, rate / 100)))


# --------------------------------------------------------------------------- topics


def check_reachable(bootstrap: str, timeout_s: float = 3.0) -> None:
    """Open (and close) a TCP connection to the first answering ``host:port`` of ``bootstrap``.

    Fails fast where librdkafka would retry until its timeout.

    Raises:
        ProduceError: no bootstrap address accepts a connection, or the string is malformed.
    """
    reasons: dict[str, str] = {}
    for address in filter(None, (a.strip() for a in bootstrap.split(","))):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ProduceError(f"bad bootstrap address {address!r}: expected host:port")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
            return
        except OSError as exc:
            reasons[address] = str(exc.strerror or exc)
    detail = (
        "; ".join(f"{a}: {r}" for a, r in reasons.items()) if len(reasons) > 1 else "".join(reasons.values())
    )
    raise ProduceError(
        f"cannot reach the Kafka broker at {bootstrap}: {detail or 'no address given'}",
        hint="is the broker running? try `daggers up` or pass --bootstrap",
    )


def _admin(bootstrap: str) -> AdminClient:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _LOG}  # its stub leaves out the logger
    return AdminClient(conf)


def _topic_partitions(admin: AdminClient | Producer, bootstrap: str, topic: str) -> int | None:
    """Return the partition count of ``topic`` (None when it does not exist) without auto-creating it.

    Raises:
        ProduceError: when the broker does not answer.
    """
    try:
        metadata = admin.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise ProduceError(
            f"cannot reach the Kafka broker at {bootstrap}: {exc.args[0].str()}",
            hint="is the broker running? try `daggers up` or pass --bootstrap",
        ) from None
    meta = metadata.topics.get(topic)
    if meta is None or meta.error is not None:
        return None
    return len(meta.partitions)


def _create(admin: AdminClient, topic: str, partitions: int, config: dict[str, str]) -> KafkaError | None:
    """Create ``topic``; return the broker's error, or None on success."""
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config)],
        request_timeout=METADATA_TIMEOUT_S,
    )[topic]
    try:
        future.result(METADATA_TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]  # a KafkaException carries its KafkaError
        return error
    return None


def _wait_visible(admin: AdminClient, bootstrap: str, topic: str, partitions: int) -> None:
    """Wait (a few seconds at most) until the metadata shows the new topic with its partitions."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while time.monotonic() < deadline:
        if (_topic_partitions(admin, bootstrap, topic) or 0) >= partitions:
            return
        time.sleep(0.1)


def ensure_topic(bootstrap: str, topic: str, partitions: int = DEFAULT_PARTITIONS) -> bool:
    """Create ``topic`` with ``partitions`` partitions and ``retention.ms=-1`` unless it exists.

    A broker that rejects the retention config gets a second request without it; an existing topic
    (including TOPIC_ALREADY_EXISTS from a concurrent creator) is left as it is.

    Returns:
        True when this call created the topic, False when it existed.

    Raises:
        ProduceError: the broker is unreachable, ``partitions`` < 1, or creation failed.
    """
    if partitions < 1:
        raise ProduceError(f"a topic needs at least one partition, not {partitions}")
    check_reachable(bootstrap)
    admin = _admin(bootstrap)
    if _topic_partitions(admin, bootstrap, topic) is not None:
        return False
    error = _create(admin, topic, partitions, TOPIC_CONFIG)
    if error is not None and error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
        _LOG.warning("creating %s with %s failed (%s); retrying without it", topic, TOPIC_CONFIG, error.str())
        first, error = error, _create(admin, topic, partitions, {})
        if error is not None and error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ProduceError(
                f"cannot create topic {topic!r} on {bootstrap}: {error.str()} "
                f"(with {TOPIC_CONFIG}: {first.str()})"
            )
    if error is not None:
        return False
    _wait_visible(admin, bootstrap, topic, partitions)
    return True


# --------------------------------------------------------------------------- sending


#: Delivery errors after which the broker may still have written the event: it timed out, or was purged, while a
#: request carrying it was in flight (librdkafka's "possibly persisted"); a frozen broker that resumes writes it.
MAYBE_WRITTEN = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._PURGE_INFLIGHT})


class _Deliveries:
    """Counts failed deliveries (only failures are reported), those of them the broker may still have written
    (:data:`MAYBE_WRITTEN`), and keeps a few distinct reasons."""

    def __init__(self) -> None:
        self.failed = 0
        self.maybe_written = 0
        self.fatal = False
        self.samples: list[str] = []
        #: The failed events (value, key, timestamp ms), kept to be sent again by a new producer after a fatal
        #: error; at most MAX_KEPT (past that, a fatal error ends the run).
        self.kept: list[tuple[bytes | None, bytes | None, int]] = []
        self.overflow = False
        #: Events left in a producer dropped after a fatal error (neither acknowledged nor reported): not
        #: delivered as far as anyone can tell, though the broker may have written them.
        self.abandoned = 0

    def take_kept(self) -> list[tuple[bytes | None, bytes | None, int]]:
        """Return the kept failures and count them as not failed (they are about to be sent again)."""
        kept, self.kept = self.kept, []
        self.failed -= len(kept)
        self.maybe_written = min(self.maybe_written, self.failed)
        self.fatal = False
        return kept

    @property
    def stop(self) -> bool:
        """True once sending more is pointless: a delivery failed or the client hit a fatal error."""
        return self.failed > 0 or self.fatal

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        self.failed += 1
        self.maybe_written += err.code() in MAYBE_WRITTEN
        if len(self.kept) < MAX_KEPT:
            self.kept.append((msg.value(), msg.key(), msg.timestamp()[1]))
        else:
            self.overflow = True
        reason = f"{err.name()}: {err.str()}"
        if len(self.samples) < MAX_ERROR_SAMPLES and reason not in self.samples:
            self.samples.append(reason)

    def on_error(self, err: KafkaError) -> None:
        self.fatal = self.fatal or err.fatal()
        reason = f"client: {err.name()}: {err.str()}"
        if len(self.samples) < MAX_ERROR_SAMPLES and reason not in self.samples:
            self.samples.append(reason)


class _Outage(Exception):
    """The broker acknowledged nothing for longer than the wait allows."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"no acknowledgement for {waited_s:.0f} s")
        self.waited_s = waited_s


class _Watch:
    """Tells a broker that does not answer from one that is slow: the events acknowledged so far (sent, less
    those still in the producer and those that failed) must grow while some wait. Says when it waits, and
    when the broker answers again; raises :class:`_Outage` after ``max_outage_s`` without an acknowledgement."""

    def __init__(
        self,
        producer: Producer,
        deliveries: _Deliveries,
        max_outage_s: float,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.producer, self.deliveries, self.max_outage_s, self.say, self.clock = (
            producer,
            deliveries,
            max_outage_s,
            say,
            clock,
        )
        self.sent = 0  # events handed to the producer (those of a chunk being sent are passed to check)
        self._acked = 0
        self._since = clock()  # the last acknowledgement, or the last moment nothing waited
        self._said_at: float | None = None  # when the waiting line was last said (None: not waiting)

    def acked(self, extra: int = 0) -> int:
        """Return how many events the broker acknowledged, given ``extra`` sent but not yet counted."""
        return self.sent + extra - len(self.producer) - self.deliveries.failed - self.deliveries.abandoned

    def check(self, extra: int = 0) -> None:
        """Look at the producer now (``extra``: events of the current chunk already sent)."""
        now, acked = self.clock(), self.acked(extra)
        if acked > self._acked or len(self.producer) == 0:
            if self._said_at is not None:
                self.say(f"broker answering again after {now - self._since:.0f} s: resuming")
            self._acked, self._since, self._said_at = max(acked, self._acked), now, None
            return
        waited = now - self._since
        if waited > self.max_outage_s:
            raise _Outage(waited)
        if waited >= OUTAGE_NOTICE_S and (self._said_at is None or now - self._said_at >= OUTAGE_REPEAT_S):
            self.say(
                f"broker not answering: waiting ({waited:.0f} s so far, up to {self.max_outage_s:.0f} s)"
            )
            self._said_at = now


def _progress(enabled: bool, total: int | None) -> tuple[Progress, Any]:
    progress = Progress(
        TextColumn("[bold]producing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )
    return progress, progress.add_task("produce", total=total, rate="")


def _wait_for_tokens(
    bucket: TokenBucket | None, n: int, producer: Producer, deadline: float | None = None
) -> None:
    """Serve delivery callbacks until the bucket has ``n`` tokens (or ``deadline`` passed), then take them."""
    if bucket is None:
        return
    while (wait := bucket.delay(n)) > 0:
        if deadline is not None and time.monotonic() >= deadline:
            return
        producer.poll(min(wait, 0.05))
    bucket.take(n)


def _send_batch(
    producer: Producer,
    topic: str,
    batch: EventBatch,
    bucket: TokenBucket | None,
    step: int,
    advance: Callable[[int], None],
    deliveries: _Deliveries,
    watch: _Watch | None = None,
    deadline: float | None = None,
    start: int = 0,
) -> int:
    """Enqueue every event of ``batch`` (key, value, CreateTime), in chunks of ``step``; with ``watch``, wait
    (bounded) for a broker that does not answer, see :class:`_Watch`. Nothing more is sent once the monotonic
    clock passes ``deadline``.

    Starts at event ``start``; returns the index of the first event not sent (``len(batch)`` when every one
    was), having stopped early once ``deliveries`` says to stop or the deadline passed. A fatal producer error
    raises :class:`_Fatal` with the index to go on from (the events before it are counted as sent).
    """
    payloads, keys, stamps = batch.payloads, batch.keys, batch.timestamps_ms()
    poll = producer.poll
    for lo in range(start, len(payloads), step):
        if deliveries.stop or (deadline is not None and time.monotonic() >= deadline):
            return lo
        hi = min(len(payloads), lo + step)
        i = lo
        try:
            _wait_for_tokens(bucket, hi - lo, producer, deadline)
            if deadline is not None and time.monotonic() >= deadline:
                return lo
            i = _enqueue(producer, topic, payloads, keys, stamps, lo, hi, watch)
            poll(0)
        except _Fatal as fatal:
            advance(fatal.index - lo)
            raise
        except (KafkaException, SystemError) as exc:
            cause = fatal_cause(exc)
            if cause is None:
                raise
            advance(i - lo)
            raise _Fatal(cause, i) from None
        advance(hi - lo)
        if watch is not None:
            watch.check()
    return len(payloads)


def is_fatal(error: KafkaError) -> bool:
    """Whether ``error`` means the producer cannot go on: a fatal error, or ``_FATAL`` ("Local: Fatal error"),
    which produce() and flush() answer (without the fatal flag) once the producer is in that state."""
    return bool(error.fatal()) or error.code() == KafkaError._FATAL


def fatal_cause(exc: BaseException) -> KafkaException | None:
    """The fatal KafkaException ``exc`` is or wraps, else None. confluent-kafka can raise a fatal error from
    within ``poll``/``flush`` as a SystemError ("returned a result with an exception set") caused by it."""
    for one in (exc, exc.__cause__, exc.__context__):
        error = one.args[0] if isinstance(one, KafkaException) and one.args else None
        if isinstance(error, KafkaError) and is_fatal(error):
            return one  # type: ignore[return-value]  # one is a KafkaException here
    return None


class _Fatal(Exception):
    """The producer hit a fatal error; ``index`` is the first event of the batch not handed to it."""

    def __init__(self, exc: KafkaException, index: int) -> None:
        super().__init__(str(exc))
        self.exc, self.index = exc, index


def _enqueue(
    producer: Producer,
    topic: str,
    payloads: list[bytes],
    keys: list[bytes],
    stamps: list[int],
    lo: int,
    hi: int,
    watch: _Watch | None,
) -> int:
    """Hand events ``lo``..``hi - 1`` to the producer; return ``hi``. Raises _Fatal on a fatal error."""
    produce, poll = producer.produce, producer.poll
    i = lo
    try:
        for i in range(lo, hi):
            while True:
                try:
                    produce(topic, payloads[i], keys[i], timestamp=stamps[i])
                    break
                except BufferError:  # the local queue is full: let librdkafka send some
                    poll(0.05)
                    if watch is not None:
                        watch.check(i - lo)
                except KafkaException as exc:  # refused before sending, e.g. a message over message.max.bytes
                    if is_fatal(exc.args[0]):
                        raise  # the producer cannot go on: produce() says so
                    raise ProduceError(
                        f"cannot send event {i} of a batch to topic {topic!r}: {exc.args[0].str()}"
                    ) from None
    except (KafkaException, SystemError) as exc:
        cause = fatal_cause(exc)
        if cause is None:
            raise
        raise _Fatal(cause, i) from None
    return hi


def _flush(producer: Producer, timeout_s: float, watch: _Watch | None = None) -> int:
    """Flush; return how many events are still undelivered after ``timeout_s``. With ``watch``, a broker that
    does not answer is waited for and reported (see :class:`_Watch`), and raises _Outage after its bound."""
    deadline = time.monotonic() + timeout_s
    remaining = len(producer)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
        if watch is not None:
            watch.check()
    return remaining


def _batches(batch: EventBatch | Iterable[EventBatch]) -> Iterator[EventBatch]:
    return iter([batch]) if isinstance(batch, EventBatch) else iter(batch)


def _parts(batch: EventBatch | Iterable[EventBatch], slice_s: float | None) -> Iterator[EventBatch]:
    """Each batch in turn, or with ``slice_s`` each batch's time slices in turn."""
    for one in _batches(batch):
        yield from (one.time_slices(slice_s) if slice_s is not None else (one,))


def produce(
    bootstrap: str,
    topic: str,
    batch: EventBatch | Iterable[EventBatch],
    *,
    rate: float | None = None,
    partitions: int | None = None,
    progress: bool = True,
    producer_config: dict[str, Any] | None = None,
    total: int | None = None,
    ack_every_s: float | None = None,
    max_outage_s: float = DEFAULT_MAX_OUTAGE_S,
    on_wait: Callable[[str], None] | None = None,
    deadline_s: float | None = None,
) -> ProduceReport:
    """Send every event of ``batch`` (or of each batch in turn, pulled lazily) to ``topic``.

    The topic is created first when missing (``partitions``, default 4, ``retention.ms=-1``). The
    key is the batch's key, the Kafka timestamp the event time in ms. ``rate`` is in events/s (None:
    as fast as possible). ``producer_config`` overrides the defaults in PRODUCER_CONFIG. ``total``
    sizes the progress bar when ``batch`` is an iterable. With ``ack_every_s``, each batch goes in slices of
    that many seconds of event time (:meth:`EventBatch.time_slices`), every event of a slice acknowledged
    before the next slice is sent: no partition is then ever more than one slice ahead of another, so a
    query whose watermark is the newest event time of all partitions (Spark's) drops none of them as late
    when the slice is shorter than its watermark delay. Ctrl-C stops sending, flushes what was
    sent and returns a report with ``interrupted=True``.

    A broker that stops answering is waited for up to ``max_outage_s`` without an acknowledgement: the events
    stay queued (``message.timeout.ms``, unless ``producer_config`` sets it, outlasts the wait) and are
    delivered in order, each once, when it answers. ``on_wait`` gets the lines that say so (default: printed
    on stderr).

    ``deadline_s`` bounds the sending in wall time: no event is sent after that many seconds from the start,
    whether or not every event was (the report's ``asked`` and ``deadline_s`` say so when it cut the sending).
    A fatal producer error (e.g. an idempotent producer whose sequence a restarted broker lost) raises a
    ProduceError that says how many events were delivered.

    Returns:
        A ProduceReport of the acknowledged events.

    Raises:
        ProduceError: the broker is unreachable, the topic cannot be created, any event was not
            delivered, or the broker did not answer for ``max_outage_s`` (the exception's ``report`` says
            how many and why).
    """
    if not max_outage_s > 0 or not math.isfinite(max_outage_s):
        raise ProduceError(
            f"the longest wait for the broker must be a positive number of seconds, not {max_outage_s}"
        )
    bucket = TokenBucket(rate, max(chunk_size(rate), rate / 20)) if rate is not None else None
    deliveries = _Deliveries()
    timeout_ms = int((max_outage_s + MESSAGE_TIMEOUT_MARGIN_S) * 1000)
    config = {
        **PRODUCER_CONFIG,
        "message.timeout.ms": timeout_ms,
        **(producer_config or {}),
        "bootstrap.servers": bootstrap,
        "on_delivery": deliveries.on_delivery,
        "error_cb": deliveries.on_error,
        "logger": _LOG,
    }
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise ProduceError(f"invalid producer configuration: {exc.args[0].str()}") from None
    ensure_topic(bootstrap, topic, partitions or DEFAULT_PARTITIONS)
    if total is None and isinstance(batch, EventBatch):
        total = len(batch)
    sent, interrupted, stopped, cut = 0, False, False, False
    started = time.monotonic()
    deadline = None if deadline_s is None else started + deadline_s + DEADLINE_GRACE_S
    bar, task = _progress(progress, total)
    flush_s = float(config["message.timeout.ms"]) / 1000 + 10
    with bar:
        watch = _Watch(
            producer,
            deliveries,
            max_outage_s,
            on_wait or (lambda line: bar.console.print(line, highlight=False, markup=False, soft_wrap=True)),
        )

        def advance(n: int) -> None:
            nonlocal sent
            sent += n
            watch.sent = sent
            elapsed = time.monotonic() - started
            bar.update(task, advance=n, rate=f"{sent / elapsed:,.0f}/s" if elapsed > 0 else "")

        recreated = 0

        def recover(fatal: _Fatal) -> None:
            """A new producer in place of one that hit a fatal error; it sends the events not acknowledged."""
            nonlocal producer, recreated
            error: KafkaError = fatal.exc.args[0]
            if recreated >= MAX_RECREATE or deliveries.overflow:
                raise fatal.exc
            with contextlib.suppress(KafkaException, SystemError):  # a fatal producer may refuse even this
                producer.purge(in_queue=True, in_flight=True)
                producer.flush(1.0)  # serves the purged events' delivery reports: they are kept
            deliveries.abandoned += len(producer)  # reported neither way: not counted as delivered
            kept = deliveries.take_kept()
            producer = Producer(config)
            watch.producer = producer
            recreated += 1
            watch.say(
                f"the producer stopped on a fatal error ({error.name()}): a new one sends again the "
                f"{counted(len(kept), 'event', fmt=',')} not acknowledged (some may arrive twice) "
                f"[{recreated}/{MAX_RECREATE}]"
            )
            for value, key, stamp in kept:
                while True:
                    try:
                        producer.produce(topic, value, key, timestamp=stamp)
                        break
                    except BufferError:
                        producer.poll(0.05)

        def send_all() -> bool:
            """Send every part; return False when the sending stopped early."""
            for one in _parts(batch, ack_every_s):
                at = 0
                while True:
                    try:
                        at = _send_batch(
                            producer,
                            topic,
                            one,
                            bucket,
                            chunk_size(rate),
                            advance,
                            deliveries,
                            watch,
                            deadline,
                            start=at,
                        )
                        if at < len(one) and deliveries.fatal and not deliveries.overflow:
                            recover(_Fatal(KafkaException(KafkaError(KafkaError._FATAL, fatal=True)), at))
                            continue
                        if at < len(one) or (ack_every_s is not None and flush()):
                            return False
                        break
                    except _Fatal as fatal:
                        at = fatal.index
                        recover(fatal)
            return True

        def flush(timeout_s: float = flush_s) -> int:
            while True:
                try:
                    return _flush(producer, timeout_s, watch)
                except (KafkaException, SystemError) as exc:
                    cause = fatal_cause(exc)
                    if cause is None:
                        raise
                    recover(_Fatal(cause, 0))

        try:
            try:
                if not send_all():
                    cut = deadline is not None and time.monotonic() >= deadline
                    stopped = not cut
            except KeyboardInterrupt:
                interrupted = True
            except (_Outage, KafkaException):
                raise
            except BaseException as exc:
                cause = fatal_cause(exc)
                if cause is not None:
                    raise cause from None
                with contextlib.suppress(KafkaException, SystemError):  # a fatal producer may refuse
                    _flush(producer, 10.0)  # deliver what was already queued, then report the failure
                raise
            undelivered = flush()
        except _Outage as outage:
            raise _outage_error(
                bootstrap, topic, producer, watch, outage, time.monotonic() - started
            ) from None
        except KafkaException as exc:
            raise _fatal_error(bootstrap, topic, producer, watch, exc, time.monotonic() - started) from None
    report = _report(topic, sent, undelivered, deliveries, time.monotonic() - started, interrupted, stopped)
    return replace(report, asked=total, deadline_s=deadline_s) if cut else report


def _fatal_error(
    bootstrap: str, topic: str, producer: Producer, watch: _Watch, exc: KafkaException, seconds: float
) -> ProduceError:
    """The error for a producer that cannot go on (a fatal librdkafka error): how many events were delivered."""
    error: KafkaError = exc.args[0]
    try:
        producer.purge(in_queue=True, in_flight=True)
        producer.flush(1.0)
    except KafkaException:
        pass  # a fatal producer may refuse even this: what it held counts as not delivered
    acked = max(0, watch.acked())
    failed = watch.sent - acked
    report = ProduceReport(
        acked,
        seconds,
        acked / seconds if seconds > 0 else 0.0,
        failed,
        topic,
        [f"{error.name()}: {error.str()}"],
    )
    fatal = "a fatal producer error" if error.fatal() else "a producer error"
    return ProduceError(
        f"the producer stopped on {fatal} from {bootstrap} ({error.name()}): {acked:,} of "
        f"{counted(watch.sent, 'event', fmt=',')} sent were delivered to topic {topic!r}, {failed:,} were not",
        hint="the broker lost the producer's state (e.g. it restarted and lost records): run the command again; "
        "the events not delivered may be partly on the topic (sending them again is at-least-once)",
        report=report,
    )


def _outage_error(
    bootstrap: str, topic: str, producer: Producer, watch: _Watch, outage: _Outage, seconds: float
) -> ProduceError:
    """Drop what the producer still holds and return the error that says how many events were not delivered."""
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(1.0)  # serves the purged events' delivery reports
    acked = max(0, watch.acked())
    failed = watch.sent - acked
    samples = [f"the broker did not answer for {outage.waited_s:.0f} s", *watch.deliveries.samples]
    report = ProduceReport(
        acked, seconds, acked / seconds if seconds > 0 else 0.0, failed, topic, samples[:MAX_ERROR_SAMPLES]
    )
    return ProduceError(
        f"the Kafka broker at {bootstrap} did not answer for {outage.waited_s:.0f} s: {failed:,} of "
        f"{counted(watch.sent, 'event', fmt=',')} sent were not delivered to topic {topic!r}",
        hint="is the broker up? wait longer with --max-outage; the events not delivered may be partly on the "
        "topic (send them again: at-least-once)",
        report=report,
    )


def _report(
    topic: str,
    sent: int,
    undelivered: int,
    deliveries: _Deliveries,
    seconds: float,
    interrupted: bool,
    stopped: bool,
) -> ProduceReport:
    """Build the report; raise ProduceError when anything was not delivered."""
    failed = deliveries.failed + undelivered + deliveries.abandoned
    unsure = (
        deliveries.maybe_written + undelivered + deliveries.abandoned
    )  # the broker may have written these
    samples = list(deliveries.samples)
    if undelivered:
        samples.append(f"{counted(undelivered, 'event')} still queued when the flush timed out")
    if deliveries.abandoned:
        samples.append(f"{counted(deliveries.abandoned, 'event')} left in a producer that hit a fatal error")
    count = sent - failed
    report = ProduceReport(
        count, seconds, count / seconds if seconds > 0 else 0.0, failed, topic, samples, interrupted
    )
    if failed:
        reason = samples[0] if samples else "unknown reason"
        early = " (sending stopped at the first failure)" if stopped else ""
        if not unsure:
            raise ProduceError(
                f"{failed:,} of {counted(sent, 'event', fmt=',')} sent were not delivered to topic {topic!r}"
                f"{early}: {reason}",
                report=report,
            )
        # an event that timed out in flight is not known to be lost: a broker that resumes may still write it
        raise ProduceError(
            f"{failed:,} of {counted(sent, 'event', fmt=',')} sent were not acknowledged by topic {topic!r}{early}: "
            f"{reason}",
            hint=f"{unsure:,} of them timed out or were still in flight: the broker may have written them, so some "
            "may be on the topic (sending them again is at-least-once)",
            report=report,
        )
    return report


# --------------------------------------------------------------------------- bad records

# Each appends or replaces bytes so that any protobuf parser must fail (checked against Empty,
# which reads every field as unknown, and against ``message_class`` when given).
_STRUCTURAL: tuple[Callable[[bytes, np.random.Generator], bytes], ...] = (
    lambda p, r: p + b"\x08" + b"\x80" * int(r.integers(1, 9)),  # varint cut short at the end
    lambda p, r: p + bytes([(int(r.integers(1, 16)) << 3) | int(r.choice([6, 7]))]),  # invalid wire type
    lambda p, r: (
        p + b"\x0a\xff\xff\x03" + bytes(r.integers(0, 128, 5, dtype=np.uint8))
    ),  # length past the end
    lambda p, r: b"\x00" + p,  # field number 0
    lambda p, r: p[: int(r.integers(0, max(1, len(p))))] + b"\xff" * 11,  # varint longer than 10 bytes
)
_SCHEMA_DEPENDENT: tuple[Callable[[bytes, np.random.Generator], bytes], ...] = (
    lambda p, r: (
        b"\x0a\x04\xff\xfe\xfd\xfc" + p
    ),  # invalid UTF-8 in field 1 (a string in every daggers event)
    lambda p, r: b'{"driver_id": "D000001", "lat": -6.2}',  # JSON sent to a protobuf topic
)


def _fails(parse: Callable[[bytes], Message], payload: bytes) -> bool:
    try:
        parse(payload)
    except (DecodeError, RuntimeError, ValueError):
        return True
    return False


def corrupt(
    payloads: list[bytes], fraction: float, seed: int, message_class: type[Message] | None = None
) -> tuple[list[bytes], list[int]]:
    """Replace ``round(fraction * len(payloads))`` payloads with bytes no protobuf parser accepts.

    Kinds: truncated varints, invalid wire types, lengths past the end, field number 0, over-long
    varints; with ``message_class`` also invalid UTF-8 in a string field and JSON text, each kept
    only when ``message_class.FromString`` rejects it. Every result is checked to fail parsing.

    Returns:
        (a new payload list, the sorted indexes of the corrupted payloads).

    Raises:
        ProduceError: ``fraction`` outside [0, 1].
    """
    if not 0.0 <= fraction <= 1.0:
        raise ProduceError(f"the corrupt fraction must be within [0, 1], not {fraction}")
    rng = np.random.default_rng([seed, 0xBAD])
    bad = np.sort(rng.choice(len(payloads), size=round(fraction * len(payloads)), replace=False)).tolist()
    kinds = _STRUCTURAL + (_SCHEMA_DEPENDENT if message_class is not None else ())
    parsers = [Empty.FromString] + ([message_class.FromString] if message_class is not None else [])
    out = list(payloads)
    for i in bad:
        candidate = kinds[int(rng.integers(0, len(kinds)))](payloads[i], rng)
        if not all(_fails(parse, candidate) for parse in parsers):
            candidate = payloads[i] + b"\x0f"  # wire type 7 never parses
        out[i] = candidate
    return out, bad


__all__ = [
    "DEFAULT_MAX_OUTAGE_S",
    "DEFAULT_PARTITIONS",
    "PRODUCER_CONFIG",
    "ProduceError",
    "ProduceReport",
    "TokenBucket",
    "check_reachable",
    "corrupt",
    "ensure_topic",
    "produce",
]
