"""The Spark SQL type of each column of a message, as text the SQL layer reads (``job.sql.scope``)."""

from __future__ import annotations

from pyspark.sql import types as T

from job.schema.arrow import spark_type
from job.schema.registry import SchemaRegistry


def type_text(kind: T.DataType) -> str:
    """Return Spark DDL for ``kind`` with every struct field name back-quoted (``STRUCT<`key`: STRING>``)."""
    if isinstance(kind, T.StructType):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {type_text(f.dataType)}" for f in kind.fields) + ">"
    if isinstance(kind, T.ArrayType):
        return f"ARRAY<{type_text(kind.elementType)}>"
    if isinstance(kind, T.MapType):
        return f"MAP<{type_text(kind.keyType)}, {type_text(kind.valueType)}>"
    return kind.simpleString().upper()


def column_types(registry: SchemaRegistry, proto_class: str) -> dict[str, str]:
    """Return column -> Spark type text of ``proto_class``'s top-level fields, in declaration order."""
    return {f.name: type_text(spark_type(f)) for f in registry.descriptor(proto_class).fields}
