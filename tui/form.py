"""The new-dagger form (also the edit form): one stream, the SQL with live validation, advanced options,
Preview and Deploy."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import (
    Button,
    Collapsible,
    DataTable,
    Footer,
    Header,
    Input,
    Label,
    Select,
    SelectionList,
    Static,
    Switch,
    TextArea,
)

from job.common.text import safe_text
from job.common.words import counted
from job.control.specs import DaggerForm
from job.control.views import DaggerView, Validation
from job.errors import DaggerError
from tui.actions import ConsoleApp
from tui.form_errors import form_problems
from tui.format import plain
from tui.late import land
from tui.modals import ConfirmScreen, by_window, rows_hint
from tui.sql_area import SqlArea
from tui.widgets import MarkedSelectionList

if TYPE_CHECKING:
    from job.query.preview import PreviewProgress

TEMPLATE_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS events,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""
VALIDATE_AFTER_S = 0.3


class DaggerFormScreen(Screen[None]):
    """Create a dagger on ``cluster``, or edit ``dagger`` (a new version of its spec)."""

    BINDINGS = [
        Binding("f5", "preview", "Preview"),
        Binding("ctrl+s", "deploy", "Deploy / save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    app: ConsoleApp

    def __init__(self, cluster: str, dagger: DaggerView | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.dagger = dagger
        self.base_text: str | None = None
        self.base_version: int | None = None
        self.validation: Validation | None = None
        self._validated_text: str | None = None  # the spec text self.validation is the answer for
        self._timer: Timer | None = None
        self._group_touched = False
        self._auto_group = ""
        self._filling = False
        self._touched = dagger is not None  # an edit shows what is wrong with the spec at once
        self._pristine: str | None = None  # the new form's spec before the user changed anything

    # ---- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="form"):
            yield Static(id="form-title")
            yield Label("Name")
            yield Input(placeholder="lower-case-with-dashes", id="name")
            yield Label("Proto class")
            yield Select[str]([], prompt="pick a message from protos/", id="proto")
            yield Label(
                "Topics (space picks ✓ or leaves out; the topics that exist on the cluster's brokers)"
            )
            yield MarkedSelectionList[str](id="topics")
            with Horizontal(classes="row"):
                with VerticalScroll(classes="cell"):
                    yield Label("Table name in the SQL")
                    yield Input(value="data_stream", id="table")
                with VerticalScroll(classes="cell"):
                    yield Label("Consumer group")
                    yield Input(id="group")
                with VerticalScroll(classes="cell"):
                    yield Label("Timestamp field (rowtime)")
                    yield Select[str]([], prompt="pick the event time", id="timestamp")
            yield Label("Dagger SQL")
            yield SqlArea(TEMPLATE_SQL, id="sql")
            yield Static(id="validation")
            with Collapsible(title="Advanced options", id="advanced"):
                with Horizontal(classes="row"):
                    with VerticalScroll(classes="cell"):
                        yield Label("Watermark delay (ms)")
                        yield Input("10000", id="watermark", type="integer")
                    with VerticalScroll(classes="cell"):
                        yield Label("Parallelism")
                        yield Input("2", id="parallelism", type="integer")
                    with VerticalScroll(classes="cell"):
                        yield Label("Start from")
                        yield Input("earliest", id="start-from")
                with Horizontal(classes="row"):
                    with VerticalScroll(classes="cell"):
                        yield Label("Sink")
                        yield Select[str](
                            [("InfluxDB", "influx"), ("log (debug)", "log")],
                            value="influx",
                            allow_blank=False,
                            id="sink",
                        )
                    with VerticalScroll(classes="cell"):
                        yield Label("Measurement")
                        yield Input(id="measurement")
                    with VerticalScroll(classes="cell"):
                        yield Label("Database")
                        yield Input("daggers", id="database")
                with Horizontal(classes="row"):
                    with VerticalScroll(classes="cell"):
                        yield Label("Isolation")
                        yield Select[str](
                            [
                                ("shared application", "shared"),
                                ("fused with like daggers", "fused"),
                                ("dedicated application", "dedicated"),
                            ],
                            value="shared",
                            allow_blank=False,
                            id="isolation",
                        )
                    with VerticalScroll(classes="cell"):
                        yield Label("Light (little data: least CPU a batch, read at window close)")
                        yield Switch(False, id="light")
            with Horizontal(id="buttons"):
                yield Button("Preview (F5)", id="preview-button")
                yield Button("Deploy (ctrl+s)", id="deploy-button", variant="success")
                yield Button("Cancel (esc)", id="cancel-button")
            yield Static(id="preview-status")
            yield DataTable(id="preview-rows", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        from job.schema import default_registry

        protos = default_registry().message_names()
        self.query_one("#proto", Select).set_options([(p, p) for p in protos])
        cluster = self.app.plane.cluster(self.cluster)
        form = DaggerForm(
            bootstrap_servers=cluster.kafka_bootstrap, influx_url=cluster.influx_url, sql=TEMPLATE_SQL
        )
        if self.dagger is not None:
            current = self.app.plane.version(self.dagger.ref)
            self.base_text, self.base_version = current.spec_text, current.version
            form = DaggerForm.from_text(current.spec_text)
            self._group_touched = True
        elif "daggers.events.BookingLog" in protos:
            form.proto_class = "daggers.events.BookingLog"
        self.form_defaults = form
        self._fill(form)
        title = (
            f"Edit [b]{self.dagger.ref}[/b] (v{self.base_version} → v{(self.base_version or 0) + 1}) on {self.cluster}"
            if self.dagger
            else f"New dagger on cluster [b]{self.cluster}[/b]"
        )
        self.query_one("#form-title", Static).update(title)
        if self.dagger is not None:
            self.query_one("#name", Input).disabled = True
            self.query_one("#deploy-button", Button).label = "Save & roll out (ctrl+s)"
        self.app.warm_spark()
        self._set_topics(list(form.topics), list(form.topics))  # at once; the broker's topics follow
        self._load_topics(form.topics)
        self.query_one("#name" if self.dagger is None else "#sql").focus()
        self._pristine = self.spec_text()
        self.validate_soon()

    def _fill(self, form: DaggerForm) -> None:
        self._filling = True
        try:
            self.query_one("#name", Input).value = form.name
            if form.proto_class:
                self.query_one("#proto", Select).value = form.proto_class
                self._timestamp_options(form.proto_class, form.timestamp_field)
            self.query_one("#table", Input).value = form.table
            self.query_one("#group", Input).value = form.group
            self.query_one("#sql", SqlArea).text = form.sql.rstrip("\n")
            self.query_one("#watermark", Input).value = str(form.watermark_delay_ms)
            self.query_one("#parallelism", Input).value = str(form.parallelism)
            self.query_one("#start-from", Input).value = form.start_from
            self.query_one("#sink", Select).value = (
                form.sink_type if form.sink_type in ("influx", "log") else "influx"
            )
            self.query_one("#measurement", Input).value = form.measurement
            self.query_one("#database", Input).value = form.database
            self.query_one("#isolation", Select).value = (
                form.isolation if form.isolation in ("fused", "dedicated") else "shared"
            )
            self.query_one("#light", Switch).value = form.light
        finally:
            self._filling = False

    def _timestamp_options(self, proto: str, current: str | None = None) -> None:
        from job.schema import default_registry

        try:
            fields = default_registry().fields(proto)
        except DaggerError:
            return
        names = [f.name for f in fields.values() if f.kind in ("timestamp", "int64") and not f.repeated]
        select = self.query_one("#timestamp", Select)
        select.set_options([(n, n) for n in names])
        pick = (
            current
            if current in names
            else ("event_timestamp" if "event_timestamp" in names else (names[0] if names else None))
        )
        if pick:
            select.value = pick

    @work(thread=True, exclusive=True, group="topics")
    def _load_topics(self, chosen: list[str]) -> None:
        try:
            topics = self.app.plane.cluster_topics(self.cluster)
        except DaggerError as exc:
            topics = []
            land(self, self._topics_failed, exc)
        land(self, self._set_topics, sorted(set(topics) | set(chosen)), chosen)

    def _topics_failed(self, exc: DaggerError) -> None:
        self.notify(
            safe_text(f"cannot list topics: {exc.message}", multiline=True), severity="warning", markup=False
        )

    def _set_topics(self, topics: list[str], chosen: list[str]) -> None:
        widget = self.query_one("#topics", SelectionList)
        keep = set(widget.selected) | set(chosen)
        self._filling = True
        widget.clear_options()
        widget.add_options([(t, t, t in keep) for t in topics])
        self._filling = False
        self.schedule_validation()

    # ---- the form's value ---------------------------------------------------------------------

    def form(self) -> DaggerForm:
        """Return the form's current values."""

        def text(widget_id: str) -> str:
            return self.query_one(widget_id, Input).value.strip()

        def integer(widget_id: str, default: int) -> int:
            try:
                return int(text(widget_id))
            except ValueError:
                return default

        def choice(widget_id: str) -> str:
            value = self.query_one(widget_id, Select).value
            return "" if value is Select.NULL else str(value)

        base = self.form_defaults
        return DaggerForm(
            name=text("#name"),
            proto_class=choice("#proto"),
            topics=list(self.query_one("#topics", SelectionList).selected),
            table=text("#table"),
            group=text("#group"),
            timestamp_field=choice("#timestamp"),
            bootstrap_servers=base.bootstrap_servers,
            start_from=text("#start-from") or "earliest",
            sql=self.query_one("#sql", SqlArea).text,
            watermark_delay_ms=integer("#watermark", 10_000),
            parallelism=integer("#parallelism", 2),
            trigger_interval_s=base.trigger_interval_s,
            sink_type=choice("#sink") or "influx",
            influx_url=base.influx_url,
            database=text("#database") or "daggers",
            measurement=text("#measurement"),
            isolation=choice("#isolation") or "shared",
            light=self.query_one("#light", Switch).value,
        )

    def spec_text(self) -> str:
        """Return the spec YAML the form stands for (keeping what the base spec has beyond the form)."""
        return self.form().to_text(self.base_text)

    # ---- validation as you type ---------------------------------------------------------------

    def schedule_validation(self) -> None:
        """Validate once typing pauses for a moment."""
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(VALIDATE_AFTER_S, self.validate_soon)

    def validate_soon(self) -> None:
        """Check the spec as the form is now in a worker thread (the check takes ~0.1 s here, a round trip
        through a server): typing goes on meanwhile, and the answer shows when it lands, if the form still says
        the same."""
        self._validate_in_thread(self.spec_text())

    @work(thread=True, exclusive=True, group="validate")
    def _validate_in_thread(self, text: str) -> None:
        land(self, self._show_validation, text, self._check(text))

    def _check(self, text: str) -> Validation:
        try:
            return self.app.plane.validate(self.cluster, text)
        except DaggerError as exc:  # the server cannot be reached: said where the verdict goes
            return Validation(ok=False, title=exc.title, message=exc.message, hint=exc.hint)

    def validate(self, show: bool = False) -> Validation:
        """Check the spec now (schemas, SQL with line and column), reusing the last answer when it was for the
        same text, show it and return it (Deploy and Preview wait for it)."""
        text = self.spec_text()
        known = self.validation if self._validated_text == text else None
        result = known or self._check(text)
        self._show_validation(text, result, show)
        return result

    def _show_validation(self, text: str, result: Validation, show: bool = False) -> None:
        """Show ``result``, the check of ``text``, once the user has changed the form (or with ``show``): a
        blank new form says nothing yet. An answer for a text the form no longer holds is dropped."""
        if text != self.spec_text():
            return
        self.validation, self._validated_text = result, text
        area = self.query_one("#sql", SqlArea)
        label = self.query_one("#validation", Static)
        self._touched = self._touched or show or (self._pristine is not None and text != self._pristine)
        if not self._touched:
            label.update("")
            label.set_class(False, "invalid")
            area.error_at = None
        elif result.ok:
            reads = "; ".join(f"{t}: {', '.join(c)}" for t, c in result.columns.items())
            window = (
                f" · window {result.window[0]}" + (f" sliding {result.window[1]}" if result.window[1] else "")
                if result.window
                else " · no window (pass-through)"
            )
            label.update(plain(f"✓ valid · reads {reads}{window}", "green"))
            label.set_class(False, "invalid")
            area.error_at = None
        else:
            where = f" at line {result.line}, column {result.col}" if result.line else ""
            hint = f" — {result.hint}" if result.hint else ""
            problems = None if result.line else form_problems(result.message)
            label.update(
                plain(
                    "\n".join(f"✗ {p}" for p in problems)
                    if problems
                    else f"✗ {result.title}{where}: {result.message}{hint}",
                    "bold red",
                    multiline=True,
                )
            )
            label.set_class(True, "invalid")
            area.error_at = (result.line, result.col or 1) if result.line else None

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._filling:
            return
        if event.input.id == "group" and event.value != self._auto_group:
            self._group_touched = True  # typed by the user: stop filling it in
        if event.input.id == "name" and not self._group_touched:
            self._auto_group = f"dagger-{event.value.strip()}" if event.value.strip() else ""
            self.query_one("#group", Input).value = self._auto_group
        self.schedule_validation()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if not self._filling:
            self.schedule_validation()

    def on_select_changed(self, event: Select.Changed) -> None:
        if self._filling:
            return
        if event.select.id == "proto" and event.value is not Select.NULL:
            self._timestamp_options(str(event.value))
        self.schedule_validation()

    def on_switch_changed(self, event: Switch.Changed) -> None:
        if not self._filling:
            self.schedule_validation()

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        if not self._filling:
            self.schedule_validation()

    # ---- actions ------------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {
            "preview-button": self.action_preview,
            "deploy-button": self.action_deploy,
            "cancel-button": self.action_cancel,
        }[str(event.button.id)]()

    def _hint_fusion(self, ref: str) -> None:
        """Say which daggers of the cluster the new shared dagger could be one query with (isolation: fused)."""
        from job.control.fusing import fusion_hint

        try:
            isolation, partners = self.app.plane.fusible_with(ref)
        except DaggerError:
            return
        if hint := fusion_hint(self.cluster, isolation, partners):
            self.notify(safe_text(hint, multiline=True), title="Hint", timeout=20, markup=False)

    def action_cancel(self) -> None:
        self.app.pop_screen()

    def action_deploy(self) -> None:
        if not self.validate(show=True).ok:
            self.notify("fix the spec first", title="Not deployed", severity="error")
            return
        text = self.spec_text()
        plane = self.app.plane
        if self.dagger is None:
            try:
                created = plane.create(self.cluster, text, deploy=True)
            except DaggerError as exc:
                self.app.report(exc)
                return
            self.notify(f"{created.ref} created and deploying", title="Deployed")
            self._hint_fusion(created.ref)
            self.app.pop_screen()
            self.app.open_dagger(created.ref)
            return
        try:
            compat = plane.check_edit(self.dagger.ref, text)
        except DaggerError as exc:
            self.app.report(exc)
            return
        if compat.resume:
            self._save(text, fresh=False)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self._save(text, fresh=True)

        self.app.push_screen(
            ConfirmScreen(
                "This change cannot resume from the checkpoint. Start fresh?",
                "; ".join(compat.reasons) + "\nA fresh start has a new checkpoint: "
                "empty window state and counters, and start_from applies.",
            ),
            answer,
        )

    def _save(self, text: str, fresh: bool) -> None:
        assert self.dagger is not None
        try:
            result = self.app.plane.edit(
                self.dagger.ref, text, expected_version=self.base_version, allow_fresh_start=fresh
            )
        except DaggerError as exc:
            self.app.report(exc)
            return
        how = "resumes from the checkpoint" if result.compatibility.resume else "starts a new checkpoint"
        self.notify(
            safe_text(f"{result.ref} v{result.version} saved; it {how}", multiline=True),
            title="Saved",
            markup=False,
        )
        self.app.pop_screen()

    def action_preview(self) -> None:
        if not self.validate(show=True).ok:
            self.notify("fix the spec first", title="No preview", severity="error")
            return
        self.query_one("#preview-status", Static).update(
            f"preview: reading the last {counted(self.app.preview_minutes, 'minute', fmt='g')} of the topics…"
        )
        self._preview(self.spec_text())

    @work(thread=True, exclusive=True, group="preview")
    def _preview(self, text: str) -> None:
        started = time.monotonic()
        try:
            table = self.app.plane.preview_text(
                self.cluster,
                text,
                minutes=self.app.preview_minutes,
                limit=50,
                spark=self.app.spark_session(),
                on_progress=lambda p: land(self, self._preview_progress, p),
            )
        except DaggerError as exc:
            land(self, self._preview_failed, exc)
            return
        land(self, self._show_preview, table.column_names, table.to_pylist(), time.monotonic() - started)

    def _preview_failed(self, exc: DaggerError) -> None:
        self.app.report(exc)
        self.query_one("#preview-status", Static).update(
            plain(f"preview failed: {exc.message}", multiline=True)
        )

    def _preview_progress(self, progress: PreviewProgress) -> None:
        """Say how a running preview goes: its time so far, its Spark stage and tasks."""
        self.query_one("#preview-status", Static).update(
            f"preview: reading the last {counted(self.app.preview_minutes, 'minute', fmt='g')} of the topics… "
            f"{progress.text()}"
        )

    def _show_preview(self, columns: list[str], rows: list[dict[str, Any]], seconds: float) -> None:
        """Show every row of a preview, by window, in a table brought into view (it scrolls when long)."""
        table = self.query_one("#preview-rows", DataTable)
        table.clear(columns=True)
        table.add_columns(*(plain(c) for c in columns))
        for row in by_window(columns, rows):  # values from the topics: shown as text
            table.add_row(*(plain(str(row.get(c))) for c in columns))
        self.query_one("#preview-status", Static).update(
            f"preview: {counted(len(rows), 'row')} in {seconds:.1f} s (nothing deployed, no consumer group used), "
            f"below, {rows_hint(columns, len(rows))}"
        )
        self.call_after_refresh(table.scroll_visible, animate=False)  # once it has its new height
