"""The log sink: prints result rows to the console, for debugging a dagger."""

from __future__ import annotations

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from job.common.words import counted
from job.sinks.base import Sink
from job.spec import LogSinkSpec

#: Values up to this long stay on one line of their column; longer ones wrap (never cut).
WHOLE_UP_TO = 32


class LogSink(Sink):
    """Prints up to ``max_rows`` rows of every non-empty micro-batch as a table."""

    name = "log"

    def __init__(self, spec: LogSinkSpec, console: Console | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.console = console or Console()

    def open(self) -> None:
        return None

    @property
    def target(self) -> str:
        return "the console"

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        rows = [
            ["NULL" if v is None else str(v) for v in row.values()]
            for row in table.slice(0, self.spec.max_rows).to_pylist()
        ]
        view = Table(title=f"batch {batch_id}: {counted(table.num_rows, 'row')}", show_lines=False)
        needed = 1
        for i, name in enumerate(table.column_names):
            # values are never cut short: a column is as wide as its longest value (up to
            # WHOLE_UP_TO characters, which keeps S2 ids and timestamps on one line), longer ones wrap
            width = min(max([len(name), *(len(r[i]) for r in rows)]), WHOLE_UP_TO)
            view.add_column(name, overflow="fold", min_width=width)
            needed += width + 3
        for row in rows:
            view.add_row(*row)
        # wider than the terminal rather than a column dropped or cut
        self.console.print(view, width=max(self.console.width, needed), crop=False)
        if table.num_rows > self.spec.max_rows:
            self.console.print(f"... {counted(table.num_rows - self.spec.max_rows, 'more row')}")
        return int(table.num_rows)
