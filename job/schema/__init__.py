"""Protobuf schemas: compiling ``protos/`` and decoding messages into Arrow columns."""

from job.schema.registry import SchemaRegistry, default_registry

__all__ = ["SchemaRegistry", "default_registry"]
