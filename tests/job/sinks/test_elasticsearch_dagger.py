"""A real dagger (broker -> Spark -> Elasticsearch): the documents equal the ground truth, also after Spark
runs the last micro-batch again (a crash between the sink's write and Spark's commit), and after the
dagger is SIGKILLed mid-stream and restarted: a replayed micro-batch overwrites, no duplicates."""

from __future__ import annotations

import signal
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.spec import parse_spec
from tests.helpers import BOOKINGS_SQL, expected_bookings, make_spec, unique, wait_until
from tests.job.test_engine_recovery import _kill_group, _start_dagger, _status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 3, 2, 23, 57, tzinfo=UTC)  # windows on both sides of midnight: two daily indices


def es_documents(url: str, pattern: str) -> tuple[int, dict[tuple, int]]:
    """(number of documents, (window end s, city, s2id, vehicle type) -> num_of_bookings) in ``pattern``."""
    requests.post(f"{url}/{pattern}/_refresh", timeout=10)
    resp = requests.post(f"{url}/{pattern}/_search", json={"size": 10_000}, timeout=30)
    if resp.status_code == 404:
        return 0, {}
    resp.raise_for_status()
    hits = resp.json()["hits"]["hits"]
    out: dict[tuple, int] = {}
    for h in hits:
        s = h["_source"]
        when = int(datetime.fromisoformat(s["window_timestamp"].replace("Z", "+00:00")).timestamp())
        assert h["_index"] == f"{pattern[:-1]}{datetime.fromtimestamp(when, UTC):%Y.%m.%d}"
        out[(when, str(s["tag_city_id"]), s["tag_s2id"], s["tag_vehicle_type"])] = s["num_of_bookings"]
    return len(hits), out


@pytest.mark.fault
def test_exact_documents_and_no_duplicates_after_sigkill_and_restart(
    tansu_broker,
    elasticsearch,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic = unique("bookings")
    broker.create_topic(topic, partitions=2)
    prefix = f"bk-{uuid.uuid4().hex[:8]}"
    checkpoint = tmp_path / "ckpt"
    _, text = make_spec(
        name=unique("es"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=checkpoint,
        max_records_per_batch=500,
        trigger_interval_s=0.5,
    )
    head, _, _ = text.partition("sink:\n")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        head
        + f"""sink:
  type: elasticsearch
  hosts: {elasticsearch.url}
  index: "{prefix}-{{window:%Y.%m.%d}}"
  batch_size: 300
"""
    )
    log = tmp_path / "dagger.log"
    chunks = [
        generate(
            "booking",
            2000,
            seed=40 + i,
            start=T0 + timedelta(seconds=100 * i),
            duration_s=100,
            out_of_order_fraction=0.05,
        )
        for i in range(2)
    ]
    closing = generate("booking", 1, seed=98, start=T0 + timedelta(minutes=20), duration_s=1)
    produce(broker.bootstrap, topic, chunks[0], progress=False)

    proc = _start_dagger(spec_path, tmp_path, log)
    try:
        wait_until(
            "the first batches",
            lambda: _status(checkpoint).get("input_rows", 0) >= 1000,
            360,
            proc=proc,
            log=log,
        )
        _kill_group(proc, signal.SIGKILL)  # mid-stream
        assert 0 < _status(checkpoint)["input_rows"] < 2000
        produce(broker.bootstrap, topic, [chunks[1], closing], progress=False)
        proc = _start_dagger(spec_path, tmp_path, log)
        want = expected_bookings(row for c in chunks for row in c.table.to_pylist())
        wait_until(
            "Elasticsearch to equal the ground truth",
            lambda: es_documents(elasticsearch.url, f"{prefix}-*")[1] == want,
            360,
            proc=proc,
            log=log,
        )
    finally:
        _kill_group(proc, signal.SIGTERM)
    count, got = es_documents(elasticsearch.url, f"{prefix}-*")
    assert got == want and count == len(want)  # one document per window and tags: no duplicates
    assert {datetime.fromtimestamp(k[0], UTC).date() for k in want} == {
        T0.date(),
        T0.date() + timedelta(days=1),
    }


def es_spec_text(tmp_path: Path, bootstrap: str, topic: str, prefix: str, url: str, **extra: object) -> str:
    _, text = make_spec(
        name=unique("es"),
        bootstrap=bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        **extra,
    )  # type: ignore[arg-type]
    head, _, _ = text.partition("sink:\n")
    return (
        head
        + f"""sink:
  type: elasticsearch
  hosts: {url}
  index: "{prefix}-{{window:%Y.%m.%d}}"
"""
    )


def test_exact_documents_then_exact_after_spark_replays_the_last_batch(
    spark,
    tansu_broker,
    elasticsearch,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    topic = unique("bookings")
    events = generate("booking", 1500, seed=51, start=T0, duration_s=200)
    closing = generate("booking", 1, seed=52, start=T0 + timedelta(minutes=15), duration_s=1)
    produce(tansu_broker, topic, [events, closing], progress=False)
    prefix = f"bk-{uuid.uuid4().hex[:8]}"
    spec = parse_spec(es_spec_text(tmp_path, tansu_broker, topic, prefix, elasticsearch.url), "es.yaml")
    want = expected_bookings(events.table.to_pylist())
    first = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert first.sinks["elasticsearch"]["rows_written"] == len(want)
    assert es_documents(elasticsearch.url, f"{prefix}-*") == (len(want), want)

    commits = tmp_path / "ckpt" / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    second = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert second.sinks["elasticsearch"]["rows_written"] == len(want)  # the last batch was written again ...
    assert es_documents(elasticsearch.url, f"{prefix}-*") == (len(want), want)  # ... over the same documents
