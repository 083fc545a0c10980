"""A dagger's own output on its page (the Output tab): a line chart of one field summed per step over the
last 15 minutes, hour or day, for all rows or one tag value, with the day before (D-1) and the week
before (D-7) overlaid. The series come from :mod:`job.output` (the dagger's InfluxDB, PostgreSQL or
Elasticsearch sink) through the control plane; the chart is textual-plotext's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, Input, Label, Select
from textual.worker import Worker, get_current_worker
from textual_plotext import PlotextPlot

from job.common.text import safe_text
from job.control.protocol import Plane
from job.errors import DaggerError
from job.output import Output, OutputQuery, parse_tag, step_text
from tui.format import plain
from tui.late import land

#: The ranges the chart offers: label -> seconds.
RANGES = {"15m": 900, "1h": 3600, "1d": 86_400}
#: Colours of the series (now, D-1, D-7), the same on every run.
COLOURS = {"now": "cyan", "D-1": "orange", "D-7": "magenta"}


class OutputPane(Vertical):
    """The chart and its settings for dagger ``ref``; call :meth:`load` to read the output (again).

    ``plane`` reads the output; ``clock`` gives the end of the range (epoch seconds; tests pin it);
    ``report`` shows an error (a sink that cannot be read, a bad tag filter)."""

    DEFAULT_CSS = """
    OutputPane { height: auto; }
    OutputPane #output-settings { height: 3; }
    OutputPane #output-settings Select { width: 28; }
    OutputPane #output-range { width: 12; }
    OutputPane #output-tag { width: 26; }
    OutputPane #output-chart { height: 16; }
    OutputPane #output-summary { height: auto; }
    """

    def __init__(
        self,
        ref: str,
        plane: Plane,
        clock: Callable[[], float],
        report: Callable[[DaggerError], None],
        *,
        id: str | None = None,
    ) -> None:  # noqa: A002
        super().__init__(id=id)
        self.ref = ref
        self.plane = plane
        self.clock = clock
        self.report = report
        self.output: Output | None = None
        self._fields_loaded = False
        self._reading: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="output-settings"):
            yield Select[str]([], prompt="field", id="output-field", allow_blank=True)
            yield Select[str]([(k, k) for k in RANGES], value="15m", id="output-range", allow_blank=False)
            yield Input(placeholder="tag filter: key=value", id="output-tag")
            yield Checkbox("D-1", True, id="output-d1")
            yield Checkbox("D-7", True, id="output-d7")
        yield PlotextPlot(id="output-chart")
        yield Label("", id="output-summary")

    # ---- settings -----------------------------------------------------------------------------

    def query_now(self) -> OutputQuery | None:
        """Return the query the settings make, or None before a field is chosen.

        Raises OutputError for a tag filter that is not key=value."""
        field = self.query_one("#output-field", Select).value
        if not isinstance(field, str):
            return None
        compare = tuple(
            label
            for label, box in (("D-1", "#output-d1"), ("D-7", "#output-d7"))
            if self.query_one(box, Checkbox).value
        )
        since = RANGES[str(self.query_one("#output-range", Select).value)]
        return OutputQuery(
            field=field,
            since_s=since,
            until=datetime.fromtimestamp(self.clock(), UTC),
            tag=parse_tag(self.query_one("#output-tag", Input).value),
            compare=compare,
        )

    @on(Select.Changed)
    @on(Checkbox.Changed)
    @on(Input.Submitted)
    def _changed(self) -> None:
        self.load()

    # ---- reading and drawing ------------------------------------------------------------------

    def load(self, *, if_idle: bool = False) -> None:
        """Read the numeric fields (once; the first is chosen) and the output in a worker, then draw; with
        ``if_idle`` (a periodic refresh), only when no read is in flight (a slow sink piles up no threads)."""
        if if_idle and self._reading is not None and self._reading.is_running:
            return
        try:
            query = self.query_now() if self._fields_loaded else None
        except DaggerError as exc:
            self.report(exc)
            return
        self._reading = self._read(query)

    @work(thread=True, exclusive=True, group="output")
    def _read(self, query: OutputQuery | None) -> None:
        try:
            fields = None if self._fields_loaded else self.plane.output_fields(self.ref)
            output = self.plane.output(self.ref, query) if query is not None else None
        except DaggerError as exc:
            land(self, self._failed, exc)  # nothing when the operator has left the screen meanwhile
            return
        if not get_current_worker().is_cancelled:  # a newer read (other settings) replaced this one
            land(self, self._show, fields, output)

    def _failed(self, exc: DaggerError) -> None:
        self.query_one("#output-summary", Label).update(plain(f"{exc.title}: {exc.message}", multiline=True))
        self.report(exc)

    def _show(self, fields: list[str] | None, output: Output | None) -> None:
        if fields is not None:
            self._fields_loaded = True
            select = self.query_one("#output-field", Select)
            with self.prevent(Select.Changed):
                select.set_options([(plain(f), f) for f in fields])  # the sink's names, shown as text
                if fields:
                    select.value = fields[0]
            if fields:
                self.load()
            else:
                self.query_one("#output-summary", Label).update(
                    "The dagger's sink holds no numeric field yet."
                )
            return
        if output is not None:
            self.draw(output)

    def draw(self, output: Output) -> None:
        """Draw ``output``'s series on the chart and say what it shows below it."""
        self.output = output
        chart = self.query_one("#output-chart", PlotextPlot)
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        start = output.start.timestamp()
        span = output.end.timestamp() - start
        scale, unit = (60, "min") if span <= 3 * 3600 else (3600, "h")
        for series in output.series:
            if series.points:
                xs = [(t.timestamp() - start - span) / scale for t, _ in series.points]
                plt.plot(
                    xs,
                    [v for _, v in series.points],
                    label=series.label,
                    marker="braille",
                    color=COLOURS.get(series.label, "white"),
                )
        plt.xlim(-span / scale, 0)
        plt.xlabel(f"{unit} before {output.end:%Y-%m-%d %H:%M:%S} UTC")
        plt.title(
            safe_text(
                f"sum of {output.field} every {step_text(output.step_s)}"
                + (f" where {output.tag[0]} = {output.tag[1]}" if output.tag else "")
            )
        )
        chart.refresh()
        last = []
        for series in output.series:
            value = series.points[-1][1] if series.points else None
            last.append(f"{series.label} {'-' if value is None else _number(value)}")
        points = max((len(s.points) for s in output.series), default=0)
        self.query_one("#output-summary", Label).update(
            plain(f"from {output.source} · {points} steps · last: " + " · ".join(last))
        )


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.6g}"
