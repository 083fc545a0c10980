"""The log sink prints every value whole, however narrow the terminal; every sink records what it wrote where."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pyarrow as pa
from rich.console import Console

from job.sinks.log import WHOLE_UP_TO, LogSink
from job.spec import LogSinkSpec

S2_IDS = ["-6989452381233381376", "3344474403281371136"]
LONG = "x" * (WHOLE_UP_TO + 18)


def _table() -> pa.Table:
    ends = [datetime(2026, 3, 2, 9, 2, tzinfo=UTC), datetime(2026, 3, 2, 9, 1, tzinfo=UTC)]
    return pa.table(
        {
            "tag_s2id": S2_IDS,
            "tag_vehicle_type": ["motorcycle", "car"],
            "label_city": ["Jakarta Selatan", "Bandung"],
            "label_note": [LONG, "y"],
            "n": [1, 2],
            "window_timestamp": pa.array(ends, pa.timestamp("us", tz="UTC")),
        }
    )


def test_values_are_printed_whole_in_a_narrow_terminal() -> None:
    out = io.StringIO()
    sink = LogSink(LogSinkSpec(type="log"), console=Console(file=out, width=40))
    assert sink.write(_table(), 7) == 2
    text = out.getvalue()
    assert "…" not in text
    for value in (*S2_IDS, "Jakarta Selatan", "motorcycle", "2026-03-02 09:02:00+00:00", "window_timestamp"):
        assert value in text, value  # on one line of its column
    note_cells = "".join(line.split("│")[4].strip() for line in text.splitlines() if line.count("│") == 7)
    assert LONG in note_cells  # longer than a column may be: wrapped over lines, never cut


def test_a_sink_records_its_target_and_the_windows_it_wrote() -> None:
    sink = LogSink(LogSinkSpec(type="log"), console=Console(file=io.StringIO()))
    sink.write(_table(), 0)
    sink.write(_table().slice(0, 0), 1)
    assert (sink.metrics.target, sink.metrics.rows_written) == ("the console", 2)
    assert (sink.metrics.first_window, sink.metrics.last_window) == (
        "2026-03-02T09:01:00+00:00",
        "2026-03-02T09:02:00+00:00",
    )
