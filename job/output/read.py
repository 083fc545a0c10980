"""Read a dagger's output from its sink: InfluxDB first, else PostgreSQL, else Elasticsearch."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from job.output.model import COMPARES, Output, OutputError, OutputQuery, Series, shift
from job.spec import DaggerSpec, ElasticsearchSinkSpec, InfluxSinkSpec, PostgresSinkSpec

#: The sink types a dagger's output can be read from, in the order one is chosen.
READABLE = (InfluxSinkSpec, PostgresSinkSpec, ElasticsearchSinkSpec)


class Reader(Protocol):
    """Reads sums of a field per step from one sink."""

    def describe(self) -> str: ...
    def server(self) -> str: ...
    def fields(self) -> list[str]: ...
    def read(
        self, field: str, start: datetime, end: datetime, step_s: int, tag: tuple[str, str] | None
    ) -> list[tuple[datetime, float]]: ...


def sink_names(spec: DaggerSpec) -> list[str]:
    """Return the names of the dagger's sinks, as its job names them (``influx``, ``postgres-2``, …)."""
    used: list[str] = []
    for sink in spec.sinks:
        base = sink.name or sink.type
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.append(name)
    return used


def reader_for(spec: DaggerSpec, sink: str | None = None) -> Reader:
    """Return a reader of the dagger's sink named ``sink``, or of its first InfluxDB sink, else PostgreSQL,
    else Elasticsearch one.

    Raises OutputError: no such sink, or none of a readable type (kafka, log)."""
    named = list(zip(sink_names(spec), spec.sinks, strict=True))
    chosen: InfluxSinkSpec | PostgresSinkSpec | ElasticsearchSinkSpec | None
    if sink is not None:
        found = [s for n, s in named if n == sink]
        if not found:
            raise OutputError(
                f"dagger {spec.name} has no sink {sink!r}",
                hint=f"its sinks: {', '.join(n for n, _ in named)}",
            )
        if not isinstance(found[0], READABLE):
            raise OutputError(
                f"sink {sink!r} is {found[0].type}: a dagger's output is read from an influx, postgres "
                "or elasticsearch sink"
            )
        chosen = found[0]
    else:
        chosen = next((s for kind in READABLE for _, s in named if isinstance(s, kind)), None)
        if chosen is None:
            raise OutputError(
                f"dagger {spec.name} writes to {', '.join(s.type for s in spec.sinks)}: its output can "
                "be read from an influx, postgres or elasticsearch sink only"
            )
    if isinstance(chosen, InfluxSinkSpec):
        from job.output.influx import InfluxOutput

        return InfluxOutput(chosen)
    if isinstance(chosen, PostgresSinkSpec):
        from job.output.postgres import PostgresOutput

        return PostgresOutput(chosen)
    from job.output.elastic import ElasticsearchOutput

    assert isinstance(chosen, ElasticsearchSinkSpec)
    return ElasticsearchOutput(chosen)


def read_output(
    spec: DaggerSpec, query: OutputQuery, sink: str | None = None, dagger: str | None = None
) -> Output:
    """Return the sums of ``query.field`` per step over the range, now and for each comparison (D-1, D-7),
    read from the dagger's sink (see :func:`reader_for`); ``dagger`` names it in the output (default: the
    spec's name).

    Raises OutputError: no readable sink, an unknown field, the server down or refusing.
    """
    reader = reader_for(spec, sink)
    end = query.end()
    start = end - timedelta(seconds=query.since_s)
    step = query.step()
    series = []
    for label, offset in (("now", 0), *((c, COMPARES[c]) for c in query.compare)):
        back = timedelta(seconds=offset)
        points = reader.read(query.field, start - back, end - back, step, query.tag)
        series.append(Series(label, offset, shift(points, offset)))
    return Output(
        dagger or spec.name,
        query.field,
        step,
        start,
        end,
        query.tag,
        reader.describe(),
        reader.server(),
        series,
    )


def output_fields(spec: DaggerSpec, sink: str | None = None) -> list[str]:
    """Return the numeric fields the dagger's sink holds (what a chart may show). Raises OutputError."""
    return reader_for(spec, sink).fields()
