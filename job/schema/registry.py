"""Look up protobuf message classes and their fields from a compiled FileDescriptorSet."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from job.errors import SchemaError
from job.schema.compile import PROTO_ROOT, compile_descriptor_set

TIMESTAMP = "google.protobuf.Timestamp"


@dataclass(frozen=True)
class FieldInfo:
    """One top-level field of a message, as a SQL column sees it."""

    name: str
    kind: (
        str  # "double", "float", "int32", "int64", "bool", "string", "bytes", "enum", "timestamp", "message"
    )
    repeated: bool
    type_name: str | None  # full name of the enum or message type


_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_SINT32: "int32",
    FieldDescriptor.TYPE_SFIXED32: "int32",
    FieldDescriptor.TYPE_UINT32: "int64",
    FieldDescriptor.TYPE_FIXED32: "int64",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_SINT64: "int64",
    FieldDescriptor.TYPE_SFIXED64: "int64",
    FieldDescriptor.TYPE_UINT64: "int64",
    FieldDescriptor.TYPE_FIXED64: "int64",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
}


def field_info(field: FieldDescriptor) -> FieldInfo:
    """Classify a field descriptor into the kinds the Arrow decoder knows."""
    repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
    if field.type == FieldDescriptor.TYPE_ENUM:
        return FieldInfo(field.name, "enum", repeated, field.enum_type.full_name)
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        full = field.message_type.full_name
        return FieldInfo(field.name, "timestamp" if full == TIMESTAMP else "message", repeated, full)
    return FieldInfo(field.name, _SCALARS[field.type], repeated, None)


class SchemaRegistry:
    """The message types of one compiled schema version.

    Built from serialized FileDescriptorSet bytes, so the same registry can be rebuilt on a Spark
    executor from the bytes a job was started with.
    """

    def __init__(self, descriptor_set: bytes) -> None:
        self.descriptor_set = descriptor_set
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
        self._pool = descriptor_pool.DescriptorPool()
        self._names: list[str] = []
        for file in fds.file:
            self._pool.Add(file)
        for file in fds.file:
            if file.package.startswith("google.protobuf"):
                continue
            for msg in file.message_type:
                self._names.append(f"{file.package}.{msg.name}" if file.package else msg.name)

    @classmethod
    def from_b64(cls, text: str) -> SchemaRegistry:
        """Rebuild a registry from :meth:`to_b64` text (used in Spark source options)."""
        return _registry_from_b64(text)

    def to_b64(self) -> str:
        """Return the descriptor set as base64 text."""
        return base64.b64encode(self.descriptor_set).decode()

    def message_names(self) -> list[str]:
        """Return the full names of the top-level messages, sorted."""
        return sorted(self._names)

    def descriptor(self, full_name: str) -> Descriptor:
        """Return the descriptor of ``full_name``; raise SchemaError naming the known classes."""
        try:
            return self._pool.FindMessageTypeByName(full_name)
        except KeyError:
            known = ", ".join(self.message_names())
            raise SchemaError(f"unknown proto_class {full_name!r}; known classes: {known}") from None

    def message_class(self, full_name: str) -> type[Message]:
        """Return the generated message class of ``full_name``."""
        cls: type[Message] = message_factory.GetMessageClass(self.descriptor(full_name))
        return cls

    def fields(self, full_name: str) -> dict[str, FieldInfo]:
        """Return the top-level fields of ``full_name`` by name, in declaration order."""
        return {f.name: field_info(f) for f in self.descriptor(full_name).fields}


@cache
def _registry_from_b64(text: str) -> SchemaRegistry:
    return SchemaRegistry(base64.b64decode(text))


@cache
def _registry_for(root: str) -> SchemaRegistry:
    return SchemaRegistry(compile_descriptor_set(Path(root)))


def default_registry(root: Path | None = None) -> SchemaRegistry:
    """Return the registry of ``root`` (default: the project's ``protos/``), compiled once per process."""
    return _registry_for(str(root or PROTO_ROOT))
