"""The log sink: prints result rows to the console, for debugging a dagger."""

from __future__ import annotations

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from job.sinks.base import Sink
from job.spec import LogSinkSpec


class LogSink(Sink):
    """Prints up to ``max_rows`` rows of every non-empty micro-batch as a table."""

    name = "log"

    def __init__(self, spec: LogSinkSpec, console: Console | None = None) -> None:
        super().__init__()
        self.spec = spec
        self.console = console or Console()

    def open(self) -> None:
        return None

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        view = Table(title=f"batch {batch_id}: {table.num_rows} rows", show_lines=False)
        for name in table.column_names:
            view.add_column(name)
        for row in table.slice(0, self.spec.max_rows).to_pylist():
            view.add_row(*("NULL" if v is None else str(v) for v in row.values()))
        self.console.print(view)
        if table.num_rows > self.spec.max_rows:
            self.console.print(f"... {table.num_rows - self.spec.max_rows} more rows")
        return table.num_rows
