"""Delete what the daggers have read from a long benchmark's feed topics, as a topic's retention would.

Both local brokers keep every record in memory: at 50,000 events/s noida-db held 7.9 GB after 16 minutes,
so an hour-long run does not fit without it. :class:`Trimmer` asks the broker every ``every_s`` seconds to
delete each partition's records below the end it had ``keep_s`` seconds before (Kafka's DeleteRecords, as
``kafka-delete-records.sh`` does), and below what every dagger's checkpoint has committed: a dagger that
fell ``keep_s`` behind (the heavy one, under load, in the first hour-long run) keeps what it has to read. Measured on noida-db at 50,000
events/s, keeping 60 s: 0.3-0.9 GB of anonymous memory for 8 minutes, against 1.9-2.5 GB after 5 minutes
and growing without it. tansu 0.6 does not answer DeleteRecords: after three failed rounds the trimmer stops and says why.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("bench.trim")

#: (time, {(topic, partition): end offset}) at each look.
Look = tuple[float, dict[tuple[str, int], int]]


def cut_below(history: Sequence[Look], now: float, keep_s: float) -> dict[tuple[str, int], int]:
    """Return, per partition, the offset below which records may go: the end offsets of the latest look at
    least ``keep_s`` seconds before ``now`` (empty when there is none yet)."""
    old = [ends for t, ends in history if t <= now - keep_s]
    return dict(old[-1]) if old else {}


def read_floor(root: Path, fresh_s: float = 600.0, now: float | None = None) -> dict[tuple[str, int], int]:
    """Return, per partition, the lowest offset the Spark checkpoints under ``root`` still need: each
    checkpoint's end offsets of its last committed micro-batch (the next one reads from there), the least
    over the checkpoints. A checkpoint whose last commit is older than ``fresh_s`` (a failed dagger, a
    fused group's earlier generation) does not count; nor one without a commit."""
    now = time.time() if now is None else now
    floor: dict[tuple[str, int], int] = {}
    for offsets in root.rglob("offsets"):
        commits = offsets.parent / "commits"
        done = [int(f.name) for f in commits.glob("*") if f.name.isdigit()] if commits.is_dir() else []
        if not done:
            continue
        last = max(done)
        try:
            if now - (commits / str(last)).stat().st_mtime > fresh_s:
                continue
            ends = json.loads((offsets / str(last)).read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            continue
        for topic, parts in ends.items():
            if not isinstance(parts, dict):
                continue
            for part, off in parts.items():
                if isinstance(off, int):
                    key = (topic, int(part))
                    floor[key] = min(off, floor.get(key, off))
    return floor


@dataclass
class Trimmer:
    """Every ``every_s`` seconds, delete the records of ``topics`` older than ``keep_s`` seconds (by when the
    trimmer saw them written), but never a record a reader still needs: with ``floor`` (see :func:`read_floor`),
    only partitions it names, and below its offsets (a dagger that fell behind keeps its records).
    ``start()`` runs it in a thread until ``stop()``."""

    bootstrap: str
    topics: Sequence[str]
    keep_s: float
    every_s: float = 30.0
    clock: Callable[[], float] = time.time
    floor: Callable[[], dict[tuple[str, int], int]] | None = None
    deleted: int = 0  # records deleted so far
    rounds: int = 0  # successful DeleteRecords rounds
    error: str = (
        ""  # why it stopped (three failed rounds in a row: a broker without DeleteRecords), else empty
    )
    failures: int = 0  # failed rounds in a row
    _history: list[Look] = field(default_factory=list)
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trimmer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "bench-trimmer", "log_level": 2}
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2})
        try:
            while not self._done.is_set() and not self.error:
                self.tick(consumer, admin)
                self._done.wait(self.every_s)
        finally:
            consumer.close()

    def tick(self, consumer, admin) -> None:  # type: ignore[no-untyped-def]
        """Look at the ends of every partition, then delete below the ends of ``keep_s`` ago."""
        from confluent_kafka import TopicPartition

        try:
            ends: dict[tuple[str, int], int] = {}
            for topic in self.topics:
                for part in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                    ends[(topic, part)] = consumer.get_watermark_offsets(
                        TopicPartition(topic, part), timeout=10
                    )[1]
            now = self.clock()
            self._history.append((now, ends))
            below = cut_below(self._history, now, self.keep_s)
            self._history = [look for look in self._history if look[0] > now - self.keep_s - self.every_s * 2]
            if self.floor is not None:
                needed = self.floor()
                below = {key: min(off, needed[key]) for key, off in below.items() if key in needed}
            if not below:
                return
            lows = {key: consumer.get_watermark_offsets(TopicPartition(*key), timeout=10)[0] for key in below}
            wanted = [TopicPartition(t, p, off) for (t, p), off in below.items() if off > lows[(t, p)]]
            if not wanted:
                return
            for future in admin.delete_records(wanted, request_timeout=30).values():
                future.result(timeout=60)
            self.deleted += sum(tp.offset - lows[(tp.topic, tp.partition)] for tp in wanted)
            self.rounds += 1
            self.failures = 0
        except Exception as exc:  # noqa: BLE001 - a slow answer: next round; a broker without DeleteRecords: stop
            self.failures += 1
            if self.failures >= 3:
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                log.warning("the trimmer stops: %s", self.error)


def drop_topics(bootstrap: str, topics: Sequence[str], timeout_s: float = 60.0) -> str:
    """Delete ``topics`` (Kafka's DeleteTopics), as a sweep does with a step's feed once the step is over:
    both local brokers keep every record in memory, and a sweep of 1, 10, 50 and 100 daggers left noida-db
    holding 19.9 GB of a 24-GB machine by its sixth step (each step's 150-s settle and 150-s span at
    50,000 events/s), so the later steps ran short of memory. Measured: 2 million records, noida-db
    534 MB → 218 MB 10 s after the delete, tansu 230 MB → 18 MB at once.

    Returns:
        "" when every topic went (or was not there), else why not (the first failure), so the caller can
        say so in its report instead of failing the run.
    """
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    if not topics:
        return ""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    try:
        futures = admin.delete_topics(list(topics), operation_timeout=timeout_s, request_timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the step's figures stand
        return f"{type(exc).__name__}: {exc}"[:300]
    no_answer = f"no answer from {bootstrap} in {timeout_s:g} s"
    for topic, future in futures.items():
        try:
            # The client's own request timeout is the same ``timeout_s``: wait a little past it, so that a
            # broker which never answers is told by the client's _TIMED_OUT, not by whichever clock fires first.
            future.result(timeout=timeout_s + 5)
        except concurrent.futures.TimeoutError:
            return f"{topic}: {no_answer}"
        except Exception as exc:  # noqa: BLE001
            error = exc.args[0] if exc.args else None
            code = getattr(error, "code", lambda: None)()
            if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if code == KafkaError._TIMED_OUT:
                return f"{topic}: {no_answer}"
            return f"{topic}: {type(exc).__name__}: {exc}"[:300]
    return ""
