"""Preview runs a dagger's SQL over the recent records of its topics, as a bounded batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.preview import PreviewProgress, preview
from tests.helpers import BOOKINGS_SQL, expected_bookings, make_spec, unique

pytestmark = pytest.mark.integration


def test_preview_shows_windows_of_the_last_minutes(spark, tansu_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("preview")
    now = datetime.now(UTC).replace(microsecond=0)
    old = generate("booking", 500, seed=1, start=now - timedelta(hours=3), duration_s=60)
    recent = generate("booking", 800, seed=2, start=now - timedelta(minutes=2), duration_s=90)
    produce(tansu_broker, topic, [old, recent], partitions=2, progress=False)
    spec, _ = make_spec(
        name=unique("pv"),
        bootstrap=tansu_broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url="http://127.0.0.1:9",
        db="unused",
        measurement="m",
        checkpoint=tmp_path / "never",
    )
    table = preview(spec, minutes=30, limit=10_000, spark=spark)
    got = {
        (
            int(r["window_timestamp"].timestamp()),
            str(r["tag_city_id"]),
            r["tag_s2id"],
            r["tag_vehicle_type"],
        ): r["num_of_bookings"]
        for r in table.to_pylist()
    }
    assert got == expected_bookings(recent.table.to_pylist())  # only the recent events, open windows included
    assert not (tmp_path / "never").exists()  # no checkpoint, nothing deployed


def test_preview_limit(spark, tansu_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("preview")
    now = datetime.now(UTC)
    produce(
        tansu_broker,
        topic,
        generate("booking", 300, seed=3, start=now - timedelta(minutes=1), duration_s=30),
        progress=False,
    )
    spec, _ = make_spec(
        name=unique("pv"),
        bootstrap=tansu_broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql="SELECT order_number, city_id FROM data_stream",
        influx_url="http://127.0.0.1:9",
        db="unused",
        measurement="m",
        checkpoint=tmp_path / "never",
    )
    seen: list[PreviewProgress] = []
    table = preview(spec, minutes=5, limit=7, spark=spark, on_progress=seen.append)
    assert table.num_rows == 7 and table.column_names == ["order_number", "city_id"]
    # how it went: said at once, then the Spark stages and tasks of its jobs, all done at the end
    assert seen[0] == PreviewProgress(0.0) and seen[0].text() == "0 s · planning the read"
    last = seen[-1]
    assert last.stages >= 1 and last.stages_done == last.stages and 0 < last.tasks_done == last.tasks, seen
    assert [p.elapsed_s for p in seen] == sorted(p.elapsed_s for p in seen)
    assert last.text() == (
        f"{last.elapsed_s:.0f} s · Spark stage {last.stages} of {last.stages} · "
        f"{last.tasks} of {last.tasks} task{'s' if last.tasks > 1 else ''} done"
    )
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # the session is left as it was
