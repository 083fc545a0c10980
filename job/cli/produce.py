"""``daggers produce``: send synthetic driver pings, booking logs or API logs to a Kafka topic.

Call :func:`register` on the main Typer app. Three modes, all generating in bounded chunks:

* ``--count N``: N events whose event times cover ``--span`` seconds from ``--start`` (default
  ``N / --rate``, or 60 s), sent at ``--rate`` or as fast as possible;
* ``--duration S``: ``--rate`` (default 5000) events/s for S seconds, event times following the
  wall clock from ``--start``; from ``now`` (the default) they keep up with it when the sending falls behind
  the rate (a busy machine): an event is never stamped more than a slice (1 s) before it is sent, so
  several producers on one topic stay within a dagger's watermark delay of one another;
* neither: like ``--duration`` until Ctrl-C.

A broker that stops answering is waited for (``--max-outage``, 300 s): a line says so, the events wait in
the producer and go in order, each once, when it answers.
A broker that restarts having lost the idempotent producer's state (a fatal error) is survived: a line says
so and a new producer sends again the events not acknowledged (at least once; up to 3 times a run).
``--duration`` is wall time: the sending stops at it, and the summary says how many of how many were sent.

Known errors print one red ``title: message`` line (and a hint) and exit with code 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from job.cli.common import fail
from job.errors import DaggerError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_CONTINUOUS_RATE = 5000.0
DEFAULT_SPAN_S = 60.0
MAX_CHUNK_EVENTS = 100_000
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class StreamChoice(StrEnum):
    """The event streams ``daggers produce`` can generate."""

    driver_location = "driver_location"
    booking = "booking"
    api_log = "api_log"


class UsageError(DaggerError):
    """Options of ``daggers produce`` that do not fit together or do not parse."""

    title = "Invalid produce options"


def default_bootstrap(state_dir: Path | None = None) -> str:
    """Return the local stack's broker address from ``<state>/stack.json``, else 127.0.0.1:9092.

    ``state_dir`` defaults to ``$DAGGERS_HOME`` or ``./.daggers``. A missing or unreadable file, or
    one without ``broker.address`` (nested or as a dotted key), gives the default.
    """
    state = state_dir or Path(os.environ.get("DAGGERS_HOME") or ".daggers").expanduser()
    try:
        data = json.loads((state / "stack.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_BOOTSTRAP
    if not isinstance(data, dict):
        return DEFAULT_BOOTSTRAP
    broker = data.get("broker")
    address = broker.get("address") if isinstance(broker, dict) else data.get("broker.address")
    return address if isinstance(address, str) and address.strip() else DEFAULT_BOOTSTRAP


def parse_start(text: str) -> datetime:
    """Return ``now`` or an ISO 8601 time as an aware UTC datetime (a naive time is taken as UTC).

    Raises:
        UsageError: the text is neither.
    """
    if text.strip().lower() == "now":
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--start must be 'now' or an ISO 8601 time such as 2025-01-31T08:00:00Z, not {text!r}"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_late_by(text: str) -> tuple[float, float]:
    """Return ``"MIN,MAX"`` (or a single ``"S"``) seconds as a (low, high) pair.

    Raises:
        UsageError: not one or two non-negative numbers with low <= high.
    """
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2 or not 0 <= parts[0] <= parts[1] or not all(math.isfinite(p) for p in parts):
        raise UsageError(f"--late-by must be MIN,MAX seconds with 0 <= MIN <= MAX, not {text!r}")
    return parts[0], parts[1]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What to generate: events per second of event time, how many (None: until Ctrl-C), in what slices."""

    events_per_s: float
    total: int | None
    chunk_s: float
    send_rate: float | None


def make_plan(count: int | None, duration: float | None, rate: float | None, span: float | None) -> Plan:
    """Turn --count/--duration/--rate/--span into a Plan.

    Raises:
        UsageError: both --count and --duration, or a non-positive number.
    """
    for name, value in (("--count", count), ("--duration", duration), ("--rate", rate), ("--span", span)):
        if value is not None and not value > 0:
            raise UsageError(f"{name} must be > 0, not {value}")
    if count is not None and duration is not None:
        raise UsageError("give --count or --duration, not both")
    if count is not None:
        span = span or (count / rate if rate else DEFAULT_SPAN_S)
        chunks = max(1, math.ceil(count / MAX_CHUNK_EVENTS))
        return Plan(count / span, count, span / chunks, rate)
    if span is not None:
        raise UsageError("--span only goes with --count (with --duration, event times follow the wall clock)")
    rate = rate or DEFAULT_CONTINUOUS_RATE
    chunk_s = min(1.0, MAX_CHUNK_EVENTS / rate)
    total = None if duration is None else max(1, round(rate * duration))
    return Plan(rate, total, chunk_s, rate)


def _with_bad_records(
    batches: Iterator[Any], fraction: float, seed: int, counter: list[int]
) -> Iterator[Any]:
    """Replace ``fraction`` of each batch's payloads with undecodable bytes; count them in ``counter``."""
    from job.produce.producer import corrupt
    from job.schema import default_registry

    for batch in batches:
        cls = default_registry().message_class(batch.message_name)
        payloads, bad = corrupt(batch.payloads, fraction, seed=seed + counter[1], message_class=cls)
        counter[0] += len(bad)
        counter[1] += 1
        yield dataclasses.replace(batch, payloads=payloads)


def _counting_late(batches: Iterator[Any], counter: list[int]) -> Iterator[Any]:
    for batch in batches:
        counter[0] += int(batch.late.sum())
        yield batch


StreamOption = Annotated[
    StreamChoice, typer.Option("--stream", "-s", help="Which events to generate.", case_sensitive=False)
]
TopicOption = Annotated[str, typer.Option("--topic", "-t", help="Kafka topic (created when missing).")]


def produce_command(
    stream: StreamOption,
    topic: TopicOption,
    bootstrap: Annotated[
        str | None,
        typer.Option(
            help="Kafka bootstrap servers (default: the local stack's broker, else 127.0.0.1:9092)."
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(help="Events per second (default: as fast as possible with --count, 5000 otherwise)."),
    ] = None,
    count: Annotated[int | None, typer.Option(help="Send this many events, then stop.")] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            help="Send for this many seconds (wall time) at --rate, then stop, even when fewer were sent."
        ),
    ] = None,
    span: Annotated[
        float | None,
        typer.Option(
            help="With --count: seconds of event time the events cover (default count/rate, or 60)."
        ),
    ] = None,
    cities: Annotated[
        str | None, typer.Option(help="Comma-separated cities, e.g. Jakarta,Bandung (default all).")
    ] = None,
    late_fraction: Annotated[
        float, typer.Option(help="Share of events made late (event time in the past).")
    ] = 0.0,
    late_by: Annotated[str, typer.Option(help="How late, MIN,MAX seconds.")] = "60,300",
    out_of_order: Annotated[float, typer.Option(help="Share of events displaced by 1-5 s.")] = 0.0,
    corrupt_fraction: Annotated[
        float,
        typer.Option("--corrupt", help="Share of payloads replaced by bytes that do not parse as protobuf."),
    ] = 0.0,
    partitions: Annotated[int, typer.Option(help="Partitions when the topic has to be created.")] = 4,
    drivers: Annotated[
        int | None, typer.Option(help="Number of drivers (default: one ping per 5 s each).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed; the same options give the same events.")] = 42,
    start: Annotated[str, typer.Option(help="Event time of the first event: now or ISO 8601.")] = "now",
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
    max_outage: Annotated[
        float,
        typer.Option(
            "--max-outage",
            help="Seconds to wait for a broker that stops answering (a line on stderr says so) before "
            "failing. Events wait and are delivered in order when it answers, each exactly once "
            "(the producer is idempotent); after a failure the events reported as not delivered "
            "may be partly on the topic: sending them again is at-least-once.",
        ),
    ] = 300.0,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir", help="Stack state folder for the default bootstrap ($DAGGERS_HOME or ./.daggers)."
        ),
    ] = None,
) -> None:
    """Generate realistic events and send them to a Kafka topic (keys, CreateTime = event time)."""
    from job.produce.generator import generate_chunks
    from job.produce.producer import produce

    try:
        if not max_outage > 0 or not math.isfinite(max_outage):
            raise UsageError(f"--max-outage must be a positive number of seconds, not {max_outage}")
        plan = make_plan(count, duration, rate, span)
        options = {
            "cities": [c for c in cities.split(",") if c.strip()] if cities else None,
            "late_fraction": late_fraction,
            "late_by_s": parse_late_by(late_by),
            "out_of_order_fraction": out_of_order,
        }
        # --duration (or none) from now: event times follow the wall clock even when the sending falls behind
        follows = count is None and start.strip().lower() == "now"
        skipped = [0.0]
        batches = generate_chunks(
            stream.value,
            events_per_s=plan.events_per_s,
            total=plan.total,
            seed=seed,
            start=parse_start(start),
            chunk_s=plan.chunk_s,
            drivers=drivers,
            clock=(lambda: datetime.now(UTC)) if follows else None,
            skipped=skipped,
            **options,
        )
        first = next(
            batches, None
        )  # generates the first chunk: bad options fail before the broker is touched
        late, bad = [0], [0, 0]
        chained = _counting_late(_chain(first, batches), late)
        if corrupt_fraction:
            chained = _with_bad_records(chained, corrupt_fraction, seed, bad)
        report = produce(
            bootstrap or default_bootstrap(state_dir),
            topic,
            chained,
            rate=plan.send_rate,
            partitions=partitions,
            progress=progress,
            total=plan.total,
            max_outage_s=max_outage,
            deadline_s=duration,
        )
    except DaggerError as exc:
        fail(exc)
    extras = [
        f"{late[0]:,} late" if late_fraction else "",
        f"{bad[0]:,} corrupt" if corrupt_fraction else "",
        f"sent behind the rate: event times moved on {skipped[0]:,.0f} s with the clock"
        if skipped[0] >= 1
        else "",
    ]
    extra = ", ".join(e for e in extras if e)
    typer.echo(report.summary() + (f" [{extra}]" if extra else ""))
    if report.interrupted and plan.total is not None:
        raise typer.Exit(EXIT_INTERRUPTED)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
    yield from rest


def register(app: typer.Typer) -> None:
    """Add the ``produce`` command to ``app``."""
    app.command("produce")(produce_command)


__all__ = [
    "DEFAULT_BOOTSTRAP",
    "Plan",
    "StreamChoice",
    "UsageError",
    "default_bootstrap",
    "make_plan",
    "parse_late_by",
    "parse_start",
    "register",
]
