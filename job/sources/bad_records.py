"""Bad records: kept per offset range on the executors, published to a dead-letter topic and counted."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from job.errors import SourceError
from job.sources.config import OffsetRange, SourceConfig


def _range_file(folder: Path, rng: OffsetRange) -> Path:
    return folder / f"{rng.topic}-{rng.partition}-{rng.start:020d}-{rng.end:020d}.jsonl"


def record_bad(cfg: SourceConfig, rng: OffsetRange, bad: list[dict[str, Any]]) -> None:
    """Write ``bad`` (the bad records of ``rng``) to the range's file under ``bad_records_dir``, unless the
    range's file was already published."""
    if not cfg.bad_records_dir:
        return
    folder = Path(cfg.bad_records_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = _range_file(folder, rng)
    if target.with_suffix(".jsonl.published").exists():
        return  # a replayed range whose bad records are already in the dead-letter topic
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(rec) + "\n" for rec in bad))
    tmp.replace(target)


def publish_dead_letters(
    bad_records_dir: str | Path, bootstrap: str, topic: str, producer_config: dict[str, str] | None = None
) -> int:
    """Publish every not yet published bad-record file to the dead-letter topic; return the count.

    Each record keeps its raw bytes as the value, ``<topic>:<partition>:<offset>`` as the key and
    the source topic, partition, offset and error as headers. A file is marked published only
    after the broker acknowledged all of its records (a crash in between publishes it again:
    consumers can drop repeats by key). Raises SourceError when delivery fails.
    """
    from confluent_kafka import Producer

    folder = Path(bad_records_dir)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return 0
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "log_level": 2,
            **(producer_config or {}),
        }
    )
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    sent = 0
    for path in files:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            producer.produce(
                topic,
                value=base64.b64decode(rec["value_b64"]),
                key=f"{rec['topic']}:{rec['partition']}:{rec['offset']}",
                headers={
                    "dagger.source.topic": rec["topic"],
                    "dagger.source.partition": str(rec["partition"]),
                    "dagger.source.offset": str(rec["offset"]),
                    "dagger.error": rec["error"][:1000],
                },
                on_delivery=on_delivery,
            )
            producer.poll(0)
            sent += 1
        left = producer.flush(30)
        if errors or left:
            raise SourceError(
                f"cannot publish bad records to dead-letter topic {topic!r}: "
                f"{errors[0] if errors else f'{left} not acknowledged'}"
            )
        path.replace(path.with_suffix(".jsonl.published"))
    return sent


def count_bad_records(bad_records_dir: str | Path) -> int:
    """Return how many bad records a job has skipped so far (each recorded once)."""
    folder = Path(bad_records_dir)
    if not folder.is_dir():
        return 0
    seen: set[tuple[str, int, int]] = set()
    for path in [*folder.rglob("*.jsonl"), *folder.rglob("*.jsonl.published")]:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            seen.add((rec["topic"], rec["partition"], rec["offset"]))
    return len(seen)
