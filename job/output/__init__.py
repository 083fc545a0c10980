"""A dagger's own output, read back from its sink for its page (``daggers dagger output``, the console's
Output tab): the sum of one field per step over the last minutes, hour or day, optionally for one tag
value, with the day before (D-1) and the week before (D-7) on the same time axis.

No UI here: plain series of (time, value) that a CLI prints and a console charts."""

from job.output.model import (
    COMPARES,
    Output,
    OutputError,
    OutputQuery,
    Series,
    default_step,
    parse_compare,
    parse_duration,
    parse_tag,
    step_text,
)
from job.output.read import output_fields, read_output, reader_for, sink_names

__all__ = [
    "COMPARES",
    "Output",
    "OutputError",
    "OutputQuery",
    "Series",
    "default_step",
    "output_fields",
    "parse_compare",
    "parse_duration",
    "parse_tag",
    "read_output",
    "reader_for",
    "sink_names",
    "step_text",
]
