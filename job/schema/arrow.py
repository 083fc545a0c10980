"""Decode serialized protobuf messages into Arrow record batches, column by column.

This is the hot path of every dagger: each Kafka record is parsed once (upb), then every needed
column is pulled out with one list comprehension and converted with numpy/Arrow, never row by row
through a generic converter. Only the columns the SQL uses are decoded.

A payload that does not parse never stops the batch: it is reported with its index and reason so
the caller can apply the stream's bad-record policy, and the good records around it are kept.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from operator import attrgetter
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from pyspark.sql import types as T

from job.errors import SchemaError
from job.schema.registry import TIMESTAMP, FieldInfo, SchemaRegistry, field_info

_SPARK_SCALARS: dict[str, T.DataType] = {
    "double": T.DoubleType(),
    "float": T.FloatType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "bool": T.BooleanType(),
    "string": T.StringType(),
    "bytes": T.BinaryType(),
    "enum": T.StringType(),
    "timestamp": T.TimestampType(),
}


def spark_type(field: FieldDescriptor) -> T.DataType:
    """Return the Spark SQL type of a protobuf field (enums are their names, Timestamps are timestamps)."""
    info = field_info(field)
    if info.kind == "message":
        if field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            return T.MapType(spark_type(key), spark_type(value))
        inner: T.DataType = message_struct(field.message_type)
    else:
        inner = _SPARK_SCALARS[info.kind]
    return T.ArrayType(inner) if info.repeated else inner


def message_struct(desc: Descriptor, columns: Sequence[str] | None = None) -> T.StructType:
    """Return the Spark struct of a message, limited to ``columns`` (in that order) when given.

    Raises SchemaError naming a column that the message does not have.
    """
    names = list(columns) if columns is not None else [f.name for f in desc.fields]
    out = []
    for name in names:
        field = desc.fields_by_name.get(name)
        if field is None:
            raise SchemaError(f"{desc.full_name} has no field {name!r}")
        out.append(T.StructField(name, spark_type(field), nullable=True))
    return T.StructType(out)


def _timestamps(messages: list[Message], name: str) -> pa.Array:
    """The ``name`` Timestamp field of every message as microseconds (NULL where unset). A dotted
    attrgetter over the list: 0.74 µs per row against 1.18 for reading each sub-message in Python."""
    secs = np.fromiter(map(attrgetter(f"{name}.seconds"), messages), dtype=np.int64, count=len(messages))
    nanos = np.fromiter(map(attrgetter(f"{name}.nanos"), messages), dtype=np.int64, count=len(messages))
    return timestamp_array(secs, nanos)


def timestamp_array(secs: np.ndarray, nanos: np.ndarray) -> pa.Array:
    """Return Timestamps given as seconds and nanos as an Arrow array of microseconds (NULL where both are 0)."""
    micros = secs * 1_000_000 + nanos // 1000
    unset = (secs == 0) & (nanos == 0)
    return pa.array(micros, pa.timestamp("us", tz="UTC"), mask=unset if unset.any() else None)


def _enum_names(field: FieldDescriptor) -> Callable[[npt.ArrayLike], pa.Array]:
    names = {v.number: v.name for v in field.enum_type.values}

    def convert(values: npt.ArrayLike) -> pa.Array:
        ints = np.asarray(values, dtype=np.int64)
        uniq, inverse = np.unique(ints, return_inverse=True)
        lookup = np.array([names.get(int(u), str(int(u))) for u in uniq], dtype=object)
        return pa.array(lookup[inverse] if len(ints) else [], pa.string())

    return convert


def _to_python(field: FieldDescriptor, value: Any) -> Any:
    """Generic (slow) conversion for nested, repeated and map fields."""
    info = field_info(field)
    if info.kind == "message" and field.message_type.GetOptions().map_entry:
        vfield = field.message_type.fields_by_name["value"]
        return [(k, _scalar_py(vfield, v)) for k, v in value.items()]
    if info.repeated:
        return [_scalar_py(field, v) for v in value]
    return _scalar_py(field, value)


def _scalar_py(field: FieldDescriptor, value: Any) -> Any:
    info = field_info(field)
    if info.kind == "enum":
        ev = field.enum_type.values_by_number.get(value)
        return ev.name if ev else str(value)
    if info.kind == "timestamp":
        return None if value.seconds == 0 and value.nanos == 0 else value.ToDatetime(tzinfo=_UTC)
    if info.kind == "message":
        return {f.name: _to_python(f, getattr(value, f.name)) for f in field.message_type.fields}
    return value


_UTC = UTC


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (messages hold no cycles; collecting while allocating
    hundreds of thousands of them costs more than half the decode time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True)
class DecodeFailure:
    """A payload that could not be decoded: its position in the input and why."""

    index: int
    reason: str


class ArrowDecoder:
    """Decodes payloads of one message class into record batches with a fixed Arrow schema.

    ``arrow_schema`` equals ``pyspark.sql.pandas.types.to_arrow_schema(spark_schema, timezone="UTC")``,
    which is what a Spark Python data source must yield.
    """

    def __init__(self, registry: SchemaRegistry, proto_class: str, columns: Sequence[str]) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.descriptor = registry.descriptor(proto_class)
        self.cls: type[Message] = registry.message_class(proto_class)
        self.columns = list(columns)
        self.spark_schema = message_struct(self.descriptor, self.columns)
        self.arrow_schema: pa.Schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        self._enums = {
            name: _enum_names(self.descriptor.fields_by_name[name])
            for name in self.columns
            if self.descriptor.fields_by_name[name].type == FieldDescriptor.TYPE_ENUM
        }
        self._converters = [self._converter(name) for name in self.columns]
        self._wire = _wire_plan(self.descriptor, self.columns)
        self._wire_columns = (
            [self._wire_column(name) for name in self.columns] if self._wire is not None else []
        )

    def _converter(self, name: str) -> Callable[[list[Message]], pa.Array]:
        field = self.descriptor.fields_by_name[name]
        info: FieldInfo = field_info(field)
        atype = self.arrow_schema.field(name).type
        if info.repeated or info.kind == "message":
            return lambda msgs: pa.array([_to_python(field, getattr(m, name)) for m in msgs], atype)
        if info.kind == "timestamp":
            return lambda msgs: _timestamps(msgs, name)
        get = attrgetter(name)
        if info.kind == "enum":
            enum = self._enums[name]
            return lambda msgs: enum(list(map(get, msgs)))
        return lambda msgs: pa.array(list(map(get, msgs)), atype)

    def parse(self, payloads: Sequence[bytes | None]) -> tuple[list[Message], list[int], list[DecodeFailure]]:
        """Parse payloads; return the messages, their input indexes, and the failures."""
        parse = self.cls.FromString
        messages: list[Message] = []
        kept: list[int] = []
        failures: list[DecodeFailure] = []
        for i, payload in enumerate(payloads):
            if payload is None:
                failures.append(DecodeFailure(i, "empty (null) value"))
                continue
            try:
                messages.append(parse(payload))
            except (DecodeError, RuntimeError, ValueError) as exc:
                failures.append(DecodeFailure(i, f"{type(exc).__name__}: {exc}"))
                continue
            kept.append(i)
        return messages, kept, failures

    def to_batch(self, messages: list[Message]) -> pa.RecordBatch:
        """Return the record batch of already parsed messages."""
        arrays = [convert(messages) for convert in self._converters]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def decode(self, payloads: Sequence[bytes | None]) -> tuple[pa.RecordBatch, list[DecodeFailure]]:
        """Decode payloads into one batch; bad payloads are left out and returned as failures (in
        input order). A flat message is read straight from the wire (:mod:`job.schema.wire`), any
        other with upb; both give the same batch and the same failures."""
        with gc_paused():
            if self._wire is not None:
                decoded = self._decode_wire(payloads)
                if decoded is not None:
                    return decoded
            messages, _, failures = self.parse(payloads)
            return self.to_batch(messages), failures

    def decode_buffer(
        self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, nulls: np.ndarray
    ) -> tuple[pa.RecordBatch, list[DecodeFailure]]:
        """:meth:`decode` of payloads already back to back in one byte buffer: payload ``i`` is
        ``buf[starts[i]:ends[i]]``, or NULL where ``nulls[i]``. The flat messages' wire decoder reads them
        where they are, with no Python object per payload."""

        def payload(i: int) -> bytes | None:
            return None if nulls[i] else buf[starts[i] : ends[i]].tobytes()

        with gc_paused():
            if self._wire is not None:
                decoded = self._decode_wire_buffer(buf, starts, ends, nulls, payload)
                if decoded is not None:
                    return decoded
            messages, _, failures = self.parse([payload(i) for i in range(len(starts))])
            return self.to_batch(messages), failures

    def _decode_wire(
        self, payloads: Sequence[bytes | None]
    ) -> tuple[pa.RecordBatch, list[DecodeFailure]] | None:
        """Decode with the compiled wire decoder; None when a payload it could not vouch for parses
        with upb after all (the caller then decodes the whole batch with upb)."""
        n = len(payloads)
        nulls = np.fromiter((p is None for p in payloads), dtype=np.bool_, count=n)
        present: Sequence[bytes] = (
            [p or b"" for p in payloads] if nulls.any() else cast(Sequence[bytes], payloads)
        )
        buf = np.frombuffer(b"".join(present), dtype=np.uint8)
        lengths = np.fromiter(map(len, present), dtype=np.int64, count=n)
        ends = np.cumsum(lengths)
        return self._decode_wire_buffer(buf, ends - lengths, ends, nulls, payloads.__getitem__)

    def _decode_wire_buffer(
        self,
        buf: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        nulls: np.ndarray,
        payload: Callable[[int], bytes | None],
    ) -> tuple[pa.RecordBatch, list[DecodeFailure]] | None:
        """:meth:`_decode_wire` over payloads in one buffer; ``payload(i)`` returns payload ``i``'s bytes
        (None when NULL) for the few that upb must look at."""
        from job.schema import wire

        assert self._wire is not None
        n = len(starts)
        a = np.zeros((len(self.columns), n), dtype=np.int64)
        b = np.zeros((len(self.columns), n), dtype=np.int64)
        ok = ~nulls
        failures = [DecodeFailure(int(i), "empty (null) value") for i in np.flatnonzero(nulls)]
        if wire.decode_columns(buf, starts, ends, *self._wire, a, b, ok):
            parse = self.cls.FromString
            for i in np.flatnonzero(~ok).tolist():
                if nulls[i]:
                    continue
                try:
                    parse(payload(i))
                except (DecodeError, RuntimeError, ValueError) as exc:
                    failures.append(DecodeFailure(i, f"{type(exc).__name__}: {exc}"))
                    continue
                return None
            failures.sort(key=lambda f: f.index)
        keep = ok if failures else None
        arrays = [
            column(buf, a[k] if keep is None else a[k][keep], b[k] if keep is None else b[k][keep])
            for k, column in enumerate(self._wire_columns)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema), failures

    def _wire_column(self, name: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], pa.Array]:
        """Return the function that turns the wire decoder's ``a``/``b`` values of column ``name``
        (and the payload buffer ``buf`` they point into) into its Arrow array."""
        from job.schema import wire

        kind = wire.field_kind(self.descriptor.fields_by_name[name])
        atype = self.arrow_schema.field(name).type
        if kind in (wire.K_STRING, wire.K_BYTES):
            wide = (
                np.int64 if pa.types.is_large_string(atype) or pa.types.is_large_binary(atype) else np.int32
            )

            def text(buf: np.ndarray, a: np.ndarray, b: np.ndarray) -> pa.Array:
                offsets = np.empty(len(a) + 1, dtype=wide)
                data = wire.gather_bytes(buf, a, b, offsets)
                return pa.Array.from_buffers(atype, len(a), [None, pa.py_buffer(offsets), pa.py_buffer(data)])

            return text
        if kind == wire.K_TIMESTAMP:
            return lambda buf, a, b: timestamp_array(a, b)
        if kind == wire.K_ENUM:
            enum = self._enums[name]
            return lambda buf, a, b: enum(a)
        if kind == wire.K_DOUBLE:
            return lambda buf, a, b: pa.array(a.view(np.float64), atype)
        if kind == wire.K_FLOAT:
            return lambda buf, a, b: pa.array(a.astype(np.uint32).view(np.float32), atype)
        if kind == wire.K_BOOL:
            return lambda buf, a, b: pa.array(a.astype(np.bool_), atype)
        if kind == wire.K_INT64:
            return lambda buf, a, b: pa.array(a, atype)
        return lambda buf, a, b: pa.array(a.astype(np.int32), atype)


def _wire_plan(desc: Descriptor, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the wire decoder's tables for a flat proto3 message, else None (the message stays on upb)."""
    from google.protobuf.descriptor_pb2 import FileDescriptorProto

    from job.schema import wire

    if FileDescriptorProto.FromString(desc.file.serialized_pb).syntax != "proto3":
        return None  # proto2 defaults and closed enums: upb
    return wire.tables(desc, columns)


__all__ = ["ArrowDecoder", "DecodeFailure", "message_struct", "spark_type", "TIMESTAMP"]
