"""Filters and SelectFields: predicates and projections over lists of serialized protobuf messages
(the original's LongbowPlus functions), in Arrow UDFs.

A list is an ``ARRAY<BINARY>`` of messages of one class of the dagger's schema. ``CondEq(field,
value)`` is a predicate carried as JSON text (``{"field": "a.b", "value": 1}``) that ``Filters``
applies; ``SelectFields`` reads one field path of each message, as text. Each message is parsed
once per call (protobuf parsing is per message); the lists are cut and rebuilt with Arrow offsets.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from job.errors import FunctionError
from job.schema.registry import SchemaRegistry, default_registry

#: The SQL names the rewrites of Filters and SelectFields call (registered by job.functions.spark_udfs).
FILTERS_UDF = "dagger_filters"
SELECT_FIELDS_UDF = "dagger_select_fields"


@cache
def _registry(descriptor_set_b64: str) -> SchemaRegistry:
    return SchemaRegistry(base64.b64decode(descriptor_set_b64)) if descriptor_set_b64 else default_registry()


@cache
def _parser(descriptor_set_b64: str, class_name: str) -> Callable[[bytes], Message]:
    try:
        parse: Callable[[bytes], Message] = _registry(descriptor_set_b64).message_class(class_name).FromString
        return parse
    except Exception as exc:  # SchemaError: unknown class
        raise FunctionError(str(exc)) from None


def read_path(message: Message, path: str) -> Any:
    """Return the value at a dotted field path, as the original's MessageParser: an unset field is
    its default, an enum its name (names for a repeated enum), a message or a repeated field as is."""
    *parents, last = path.split(".")
    for key in parents:
        field = message.DESCRIPTOR.fields_by_name.get(key)
        if field is None or field.message_type is None:
            raise FunctionError(
                f"{message.DESCRIPTOR.full_name} has no message field {key!r} (path {path!r})"
            )
        message = getattr(message, key)
    field = message.DESCRIPTOR.fields_by_name.get(last)
    if field is None:
        raise FunctionError(f"{message.DESCRIPTOR.full_name} has no field {last!r} (path {path!r})")
    value = getattr(message, last)
    if field.type == FieldDescriptor.TYPE_ENUM:
        names = field.enum_type.values_by_number

        def as_name(n: int) -> str:
            return str(names[n].name) if n in names else str(n)

        return [as_name(v) for v in value] if _repeated(field) else as_name(value)
    return value


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated) if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED


def as_text(value: Any) -> str:
    """A field value as SelectFields returns it: numbers and names as written, booleans true/false,
    messages and lists as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Message):
        return json.dumps(
            json_format.MessageToDict(value, preserving_proto_field_name=True), separators=(",", ":")
        )
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(
        [json.loads(as_text(v)) if isinstance(v, Message) else v for v in value],
        separators=(",", ":"),
        default=str,
    )


def _equal(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(got, int | float) and isinstance(want, int | float):
        return float(got) == float(want)
    return bool(got == want)


def _predicates(texts: list[str]) -> list[tuple[str, Any]]:
    out = []
    for text in texts:
        doc = json.loads(text)
        out.append((doc["field"], doc.get("value")))
    return out


def _messages(
    lists: pa.Array, class_names: pa.Array, descriptor_set_b64: str
) -> tuple[list[Message | None], np.ndarray]:
    """Return (every message of every list, parsed; the list row of each)."""
    lists = lists.cast(pa.list_(pa.binary()))
    flat = pc.list_flatten(lists).to_pylist()
    rows = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    names = class_names.cast(pa.string()).to_pylist()
    out: list[Message | None] = []
    for data, row in zip(flat, rows, strict=True):
        name = names[row]
        if data is None or name is None:
            out.append(None)
            continue
        try:
            out.append(_parser(descriptor_set_b64, name)(data))
        except DecodeError:
            out.append(None)  # not a message of that class: neither kept nor read
    return out, rows


def filters(
    descriptor_set_b64: str, lists: pa.Array, class_names: pa.Array, predicates: pa.Array
) -> pa.Array:
    """Filters over Arrow arrays: each list keeps the messages for which every predicate holds."""
    messages, rows = _messages(lists, class_names, descriptor_set_b64)
    preds = [_predicates(p or []) for p in predicates.to_pylist()]
    keep = np.array(
        [
            m is not None and all(_equal(read_path(m, f), v) for f, v in preds[row])
            for m, row in zip(messages, rows, strict=True)
        ],
        dtype=bool,
    )
    flat = pc.list_flatten(lists.cast(pa.list_(pa.binary())))
    counts = np.bincount(rows[keep], minlength=len(lists)) if len(rows) else np.zeros(len(lists), np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(keep)), mask=pc.is_null(lists))


def select_fields(
    descriptor_set_b64: str, lists: pa.Array, class_names: pa.Array, paths: pa.Array
) -> pa.Array:
    """SelectFields over Arrow arrays: each list's values at the path, as text (NULL for a message
    that does not parse)."""
    messages, rows = _messages(lists, class_names, descriptor_set_b64)
    path_list = paths.cast(pa.string()).to_pylist()
    values = [
        None if m is None or path_list[row] is None else as_text(read_path(m, path_list[row]))
        for m, row in zip(messages, rows, strict=True)
    ]
    counts = np.bincount(rows, minlength=len(lists)) if len(rows) else np.zeros(len(lists), np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.string()), mask=pc.is_null(lists))
