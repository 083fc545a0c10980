"""The source computes S2Id columns pushed down from the SQL (job.sql.pushdown)."""

from __future__ import annotations

import pyarrow as pa
import s2sphere

from job.schema import default_registry
from job.sources.kafka import SourceConfig, source_options


def _config(derived: list[list[object]] | None, hidden: list[str] | None = None) -> SourceConfig:
    return SourceConfig(
        bootstrap_servers="127.0.0.1:1",
        topics=["t"],
        proto_class="daggers.events.DriverLocationPing",
        descriptor_set_b64=default_registry().to_b64(),
        columns=["driver_id", "lat", "long"],
        derived=derived,
        hidden=hidden,
    )


def _signed(lat: float, lng: float, level: int) -> str:
    cell = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return str(cell - (1 << 64) if cell >= 1 << 63 else cell)


def test_derived_columns_follow_the_decoded_ones_in_schema_and_batches() -> None:
    cfg = _config(
        [
            ["__dagger_s2_lat_long_13", "s2id", "lat", "long", 13],
            ["__dagger_s2_lat_long_2", "s2id", "lat", "long", 2],
        ]
    )
    assert cfg.spark_schema().fieldNames() == [
        "driver_id",
        "lat",
        "long",
        "__dagger_s2_lat_long_13",
        "__dagger_s2_lat_long_2",
    ]
    batch = pa.RecordBatch.from_pydict(
        {"driver_id": ["a", "b", "c"], "lat": [-6.2, None, -89.99], "long": [106.8, 10.0, 179.999]}
    )
    out = cfg.add_derived(batch)
    assert out.schema.names == cfg.spark_schema().fieldNames()
    assert out.column("__dagger_s2_lat_long_13").to_pylist() == [
        _signed(-6.2, 106.8, 13),
        None,
        _signed(-89.99, 179.999, 13),
    ]
    assert out.column("__dagger_s2_lat_long_2").to_pylist()[0] == _signed(-6.2, 106.8, 2)
    assert cfg.add_derived(batch.slice(0, 0)).num_rows == 0


def test_without_derived_columns_the_batch_is_untouched_and_options_round_trip() -> None:
    cfg = _config(None)
    batch = pa.RecordBatch.from_pydict({"driver_id": ["a"], "lat": [1.0], "long": [2.0]})
    assert cfg.add_derived(batch) is batch
    derived = [["__dagger_s2_lat_long_13", "s2id", "lat", "long", 13]]
    assert SourceConfig.from_options(source_options(_config(derived))).derived == derived


def test_s2cell_columns_are_64_bit_ids_and_hidden_inputs_leave_the_rows() -> None:
    from pyspark.sql.types import LongType

    cfg = _config([["__dagger_s2_lat_long_13", "s2cell", "lat", "long", 13]], hidden=["lat", "long"])
    schema = cfg.spark_schema()
    assert schema.fieldNames() == ["driver_id", "__dagger_s2_lat_long_13"]
    assert schema["__dagger_s2_lat_long_13"].dataType == LongType()
    batch = pa.RecordBatch.from_pydict(
        {"driver_id": ["a", "b"], "lat": [-6.2, float("nan")], "long": [106.8, 1.0]}
    )
    out = cfg.add_derived(batch)
    assert out.schema.names == schema.fieldNames()
    assert out.column(1).type == pa.int64()
    assert out.column(1).to_pylist() == [int(_signed(-6.2, 106.8, 13)), None]
    again = SourceConfig.from_options(source_options(cfg))
    assert again.hidden == ["lat", "long"] and again.derived == cfg.derived


def test_an_unknown_derived_function_is_a_clear_error() -> None:
    import pytest

    from job.errors import SourceError

    batch = pa.RecordBatch.from_pydict({"driver_id": ["a"], "lat": [1.0], "long": [2.0]})
    with pytest.raises(SourceError, match="unknown derived column function 'h3' for 'x'"):
        _config([["x", "h3", "lat", "long", 13]]).add_derived(batch)


def test_batches_are_sorted_stably_by_the_batch_order_column() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"driver_id": ["a", "b", "c", "d", "e"], "lat": [3.0, 1.0, None, 1.0, 2.0], "long": [0.0] * 5}
    )
    assert _config(None).ordered(batch) is batch  # no order: arrival order
    cfg = SourceConfig.from_options(
        source_options(SourceConfig(**{**_config(None).__dict__, "batch_order": "lat"}))
    )
    assert cfg.batch_order == "lat"
    assert cfg.ordered(batch).to_pydict() == {
        "driver_id": ["b", "d", "e", "a", "c"],
        "lat": [1.0, 1.0, 2.0, 3.0, None],
        "long": [0.0] * 5,
    }


def test_batch_order_must_name_a_column_the_source_hands_over() -> None:
    import pytest

    from job.errors import SourceError

    derived = [["__dagger_s2_lat_long_13", "s2cell", "lat", "long", 13]]
    cfg = SourceConfig(
        **{**_config(derived, hidden=["lat", "long"]).__dict__, "batch_order": "__dagger_s2_lat_long_13"}
    )
    assert cfg.output_columns() == ["driver_id", "__dagger_s2_lat_long_13"] == cfg.spark_schema().fieldNames()
    with pytest.raises(
        SourceError,
        match=r"batch_order 'lat' is not a column the source hands over "
        r"\(driver_id, __dagger_s2_lat_long_13\)",
    ):
        SourceConfig(**{**cfg.__dict__, "batch_order": "lat"})  # hidden: decoded for the S2 cell only
    with pytest.raises(SourceError, match="batch_order 'nope'"):
        SourceConfig.from_options({**source_options(_config(None)), "batch_order": "nope"})
