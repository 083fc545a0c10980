"""Build a dagger's sinks from its sink specs: the factory lives apart from what it builds, so
:mod:`job.sinks.base` (the contract every sink imports) never imports a sink."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from job.common.optional import require
from job.sinks.base import Sink
from job.spec import ElasticsearchSinkSpec, InfluxSinkSpec, KafkaSinkSpec, LogSinkSpec, PostgresSinkSpec

if TYPE_CHECKING:
    from job.schema.registry import SchemaRegistry


def build_sinks(
    specs: Sequence[object], registry: SchemaRegistry | None = None, dagger: str = ""
) -> list[Sink]:
    """Return a sink for each sink spec of a dagger, each with a distinct ``name``; a Kafka sink
    finds its proto_class in ``registry`` (the dagger's schema version) before protos/; an
    Elasticsearch sink puts the dagger's name ``dagger`` in its document ids.

    Raises MissingDependencyError when a sink's optional package is not installed (naming the extra).

    A sink's name is its spec's ``name``, or its type; a repeated name gets ``-2``, ``-3``, ...
    """
    out: list[Sink] = []
    used: set[str] = set()
    for spec in specs:
        sink: Sink
        # imported per type: psycopg and influxdb-client are optional extras
        if isinstance(spec, InfluxSinkSpec):
            from job.sinks.influx import InfluxSink

            sink = InfluxSink(spec)
        elif isinstance(spec, LogSinkSpec):
            from job.sinks.log import LogSink

            sink = LogSink(spec)
        elif isinstance(spec, KafkaSinkSpec):
            from job.sinks.kafka import KafkaSink

            sink = KafkaSink(spec, registry)
        elif isinstance(spec, PostgresSinkSpec):
            require("psycopg", "postgres", needed_by="the postgres sink")
            from job.sinks.postgres import PostgresSink

            sink = PostgresSink(spec)
        elif isinstance(spec, ElasticsearchSinkSpec):
            require("elasticsearch", "elasticsearch", needed_by="the elasticsearch sink")
            from job.sinks.elasticsearch import ElasticsearchSink

            sink = ElasticsearchSink(spec, dagger)
        else:  # pragma: no cover - the spec model rejects other types
            raise TypeError(f"no sink for {type(spec).__name__}")
        base = getattr(spec, "name", None) or sink.name
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        sink.name = name
        out.append(sink)
    return out
