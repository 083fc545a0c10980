"""Schema versions: a newer producer's extra field does not break an older dagger; a dagger runs
against the version pinned in its checkpoint, or against another one named in its spec."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from job.errors import SchemaError, SqlError
from job.query.plan import PINNED_SCHEMA, plan
from job.schema.arrow import ArrowDecoder
from job.schema.compile import PROTO_ROOT, compile_descriptor_set
from job.schema.registry import SchemaRegistry, default_registry
from tests.helpers import make_spec

BOOKING = "daggers.events.BookingLog"


def _variant(tmp_path: Path, name: str, edit: tuple[str, str]) -> SchemaRegistry:
    root = tmp_path / name
    shutil.copytree(PROTO_ROOT, root)
    proto = root / "daggers" / "events" / "booking_log.proto"
    text = proto.read_text()
    assert edit[0] in text
    proto.write_text(text.replace(*edit))
    return SchemaRegistry(compile_descriptor_set(root, tmp_path / f"{name}-out"))


def test_newer_producer_field_is_ignored_by_an_older_dagger(tmp_path: Path) -> None:
    newer = _variant(
        tmp_path, "v2", ("int64 fare_idr = 10;", "int64 fare_idr = 10;\n  string promo_code = 11; //")
    )
    msg = newer.message_class(BOOKING)(
        order_number="o-9", city_id=2, status=4, fare_idr=12000, promo_code="HEMAT"
    )
    old = ArrowDecoder(default_registry(), BOOKING, ["order_number", "city_id", "status", "fare_idr"])
    batch, failures = old.decode([msg.SerializeToString()])
    assert failures == []
    assert batch.to_pylist() == [
        {"order_number": "o-9", "city_id": 2, "status": "COMPLETED", "fare_idr": 12000}
    ]


def _spec(tmp_path: Path, sql: str, schema_file: str | None = None):  # type: ignore[no-untyped-def]
    spec, _ = make_spec(
        name="pinned",
        bootstrap="127.0.0.1:9",
        topic="t",
        proto_class=BOOKING,
        sql=sql,
        influx_url="http://127.0.0.1:9",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    return spec.model_copy(update={"schema_file": schema_file})


def test_a_dagger_runs_against_its_pinned_version(tmp_path: Path) -> None:
    older = _variant(tmp_path, "v0", ("  int64 fare_idr = 10;       // fare in rupiah, 0 until known\n", ""))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / PINNED_SCHEMA).write_bytes(older.descriptor_set)
    sql = "SELECT order_number, fare_idr FROM data_stream"
    with pytest.raises(SqlError, match="unknown column fare_idr"):
        plan(_spec(tmp_path, sql), tmp_path)  # the pinned (older) version has no fare_idr
    current = tmp_path / "current.pb"
    current.write_bytes(default_registry().descriptor_set)
    p = plan(_spec(tmp_path, sql, str(current)), tmp_path)  # re-run against another version
    assert p.translation.columns == {"data_stream": ["fare_idr", "order_number"]}


def test_a_new_dagger_pins_the_current_version(tmp_path: Path) -> None:
    from job.query.plan import pin_schema

    p = plan(_spec(tmp_path, "SELECT order_number FROM data_stream"), tmp_path)
    pinned = pin_schema(p)
    assert pinned.read_bytes() == default_registry().descriptor_set


def test_bad_schema_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\xff\x00 not a descriptor set")
    with pytest.raises(SchemaError, match="is not a compiled FileDescriptorSet"):
        plan(_spec(tmp_path, "SELECT order_number FROM data_stream", str(junk)), tmp_path)
    with pytest.raises(SchemaError, match="does not exist"):
        plan(_spec(tmp_path, "SELECT order_number FROM data_stream", str(tmp_path / "nope.pb")), tmp_path)
