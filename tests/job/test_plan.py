"""What a plan hands each stream's source: the order of its batches."""

from __future__ import annotations

from pathlib import Path

from job.plan import plan
from job.spec import parse_spec
from tests.helpers import DRIVERS_SQL, make_spec


def test_a_grouped_stream_is_sorted_by_its_first_key_unless_a_transformer_reads_it(tmp_path: Path) -> None:
    _, text = make_spec(name="order", bootstrap="127.0.0.1:1", topic="t", proto_class="daggers.events.DriverLocationPing",
                        sql=DRIVERS_SQL, influx_url="http://127.0.0.1:1", db="d", measurement="m",
                        checkpoint=tmp_path / "ckpt")
    assert plan(parse_spec(text, "a.yaml"), tmp_path).streams[0].source.batch_order == "__dagger_s2_lat_long_13"
    dedup = text.replace("    bad_records:", "    transformers:\n      - {type: deduplicate, keys: [driver_id], ttl_s: 60}\n"
                                             "    bad_records:")
    assert dedup != text
    assert plan(parse_spec(dedup, "b.yaml"), tmp_path).streams[0].source.batch_order == ""
