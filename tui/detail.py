"""One dagger: its state, live sparklines, last error, spec, versions with diffs, and the actions."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Label, Sparkline, Static, TabbedContent, TabPane

from job.common.text import safe_text
from job.common.words import counted
from job.control.health_model import HealthSettings, event_watermark, rate_window
from job.control.rates import rate_series
from job.control.views import DaggerScreenView, DaggerView, VersionView
from job.errors import DaggerError
from tui.actions import ConsoleApp
from tui.format import age, figure, number, plain, span, state_text, when
from tui.late import RefreshingScreen, land
from tui.modals import AskScreen, ConfirmScreen, RowsScreen
from tui.output import OutputPane
from tui.widgets import FlatSparkline


class DaggerScreen(RefreshingScreen):
    """A dagger's detail. Actions: deploy, stop, restart, edit, publish to Kafka, preview, rollback, delete."""

    reload_on_resume = True

    BINDINGS = [
        Binding("d", "deploy", "Deploy"),
        Binding("s", "stop", "Stop"),
        Binding("r", "restart", "Restart"),
        Binding("e", "edit", "Edit"),
        Binding("k", "publish", "Publish to Kafka"),
        Binding("m", "move", "Move"),
        Binding("p", "preview", "Preview"),
        Binding("b", "rollback", "Roll back"),
        Binding("x", "delete", "Delete"),
        Binding("1", "tab('spec-tab')", "Spec", show=False),
        Binding("2", "tab('versions-tab')", "Versions", show=False),
        Binding("3", "tab('audit-tab')", "Audit", show=False),
        Binding("4", "tab('output-tab')", "Output", show=False),
        Binding("escape", "back", "Back"),
    ]

    app: ConsoleApp

    def __init__(self, ref: str) -> None:
        super().__init__()
        self.ref = ref
        self.view: DaggerView | None = None
        self.versions: list[VersionView] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(id="status")
            with Horizontal(id="sparks"):
                for key, label in (("throughput", "rows/s"), ("lag", "lag"), ("batch", "batch ms")):
                    with Vertical(classes="spark"):
                        yield Label(label, id=f"{key}-label")
                        yield FlatSparkline([], id=f"{key}-spark")
            yield Static(id="error")
            with TabbedContent(id="tabs"):
                with TabPane("Spec", id="spec-tab"):
                    yield Static(id="spec")
                with TabPane("Versions", id="versions-tab"):
                    yield DataTable(id="versions", cursor_type="row")
                    yield Static(id="diff")
                with TabPane("Audit", id="audit-tab"):
                    yield DataTable(id="audit", cursor_type="row")
                with TabPane("Output", id="output-tab"):
                    yield OutputPane(self.ref, self.app.plane, self.app.clock, self.app.report, id="output")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#versions", DataTable).add_columns("v", "when (UTC)", "by", "checkpoint", "comment")
        self.query_one("#audit", DataTable).add_columns("when (UTC)", "user", "action", "allowed")
        self.reload()
        self.refresh_every()

    def fetch(self) -> DaggerScreenView:
        """Read the dagger, its samples, versions and audit trail (one request through a server)."""
        return self.app.plane.dagger_screen(self.ref, 120, 50)

    def draw(self, data: DaggerScreenView) -> None:
        """Redraw the dagger from what :meth:`fetch` read."""
        self.view = view = data.dagger
        samples, versions, audit = data.samples, data.versions, data.audit
        self.ref = view.ref
        now = self.app.clock()
        p, h = view.progress, view.health
        retry = f" · next retry in {age(h['next_retry_at'], now)}" if h.get("next_retry_at") else ""
        status = Text.assemble(  # Text.assemble's strings are text, not markup; safe_text escapes controls
            plain(view.ref, "bold"),
            plain(f"  on {view.cluster} ({view.datacentre})  "),
            plain(f"moving from {view.moving_from}  ", "yellow") if view.moving_from else "",
            state_text(view.state),
            plain(
                f" ({h.get('reason') or '-'}{retry})  controller: {view.actual_state}  desired "
                f"{view.desired_state}"
            )
            + "\n",
            f"version {view.current_version}"
            + (f" (running v{view.running_version})" if view.running_version else ""),
            plain(
                f" · pid {view.pid or '-'} on {view.host or '-'} · up {age(now, view.started_at)}"
                f" · restarts {view.restarts}"
            )
            + "\n",
            f"rows read {number(p.get('input_rows'))} · {figure(h.get('rows_per_s'), 'rows/s')}"
            f" · batch {figure(h.get('batch_ms'), 'ms')} · lag {figure(h.get('lag'))}"
            f" · late dropped {'≤ ' if p.get('late_before_filter') else ''}{number(p.get('late_rows_dropped'))}"
            f" · bad records {number(p.get('bad_records'))}"
            f"\nwatermark {safe_text(event_watermark(p.get('watermark')) or '-')}"
            + (f" ({span(h['watermark_age_s'])} behind)" if h.get("watermark_age_s") is not None else "")
            + f" · last update {age(now, view.status_updated_at)} ago",
        )
        self.query_one("#status", Static).update(status)
        window = rate_window(samples, p, HealthSettings.from_env())  # the figure's own window
        series = {  # rows/s: rows read over wall time, as the health model's figure
            "throughput": rate_series(samples, window),
            "lag": [float(s.lag) for s in samples if s.lag is not None],  # the lag reads
            "batch": [float(s.batch_duration_ms) for s in samples],
        }
        for key, values in series.items():
            self.query_one(f"#{key}-spark", Sparkline).data = values
            last = number(values[-1]) if values else "-"
            label = {"throughput": "rows/s", "lag": "lag", "batch": "batch ms"}[key]
            self.query_one(f"#{key}-label", Label).update(
                f"{label}: {last} (max {number(max(values) if values else None)})"
            )
        error = self.query_one("#error", Static)
        again = (
            f" (before it started again {age(now, view.started_at)} ago)"
            if view.actual_state == "running" and view.started_at
            else ""
        )
        error.update(
            plain(f"last error{again}: {view.last_error}", "red", multiline=True) if view.last_error else ""
        )
        error.display = bool(view.last_error)
        if [v.version for v in versions] != [v.version for v in self.versions]:
            self._show_versions(versions)
        table = self.query_one("#audit", DataTable)
        table.clear()
        for a in audit:
            table.add_row(
                when(a.at),
                plain(a.user),
                plain(a.action),
                "yes" if a.allowed else Text("DENIED", style="red"),
            )
        if self.query_one(TabbedContent).active == "output-tab":
            self.query_one(OutputPane).load(if_idle=True)

    def _show_versions(self, versions: list[VersionView]) -> None:
        self.versions = versions
        current = versions[-1]
        self.query_one("#spec", Static).update(
            Syntax(
                safe_text(current.spec_text, multiline=True),
                "yaml",
                line_numbers=True,
                theme="ansi_dark",
                word_wrap=True,
            )
        )
        table = self.query_one("#versions", DataTable)
        table.clear()
        for v in reversed(versions):
            table.add_row(
                str(v.version),
                when(v.created_at),
                plain(v.created_by),
                f"epoch {v.checkpoint_epoch}",
                plain(v.comment),
                key=str(v.version),
            )
        self._show_diff(current.version)

    def _show_diff(self, version: int) -> None:
        text = self.app.plane.diff(self.ref, max(version - 1, 1), version) if version > 1 else ""
        self.query_one("#diff", Static).update(
            Syntax(safe_text(text, multiline=True) or "(first version)", "diff", theme="ansi_dark")
        )

    def selected_version(self) -> int | None:
        """Return the version under the cursor of the Versions table."""
        table = self.query_one("#versions", DataTable)
        if not table.row_count:
            return None
        return int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or 0) or None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "versions" and event.row_key is not None and event.row_key.value:
            self._show_diff(int(event.row_key.value))

    # ---- actions ------------------------------------------------------------------------------

    def _do(self, what: str, call: Callable[[], object]) -> bool:
        try:
            call()
        except DaggerError as exc:
            self.app.report(exc)
            return False
        self.notify(safe_text(what), markup=False)  # it may quote a name or a topic typed in
        self.reload()
        return True

    def action_deploy(self) -> None:
        self._do(f"{self.ref}: deploy asked", lambda: self.app.plane.deploy(self.ref))

    def action_stop(self) -> None:
        self._do(f"{self.ref}: stop asked", lambda: self.app.plane.stop(self.ref))

    def action_restart(self) -> None:
        self._do(f"{self.ref}: restart asked", lambda: self.app.plane.restart(self.ref))

    def action_edit(self) -> None:
        if self.view is not None:
            self.app.edit_dagger(self.view)

    def action_publish(self) -> None:
        def publish(topic: str | None) -> None:
            if topic:
                self._do(
                    f"{self.ref}: publishing to Kafka topic {topic}",
                    lambda: self.app.plane.publish_to_kafka(self.ref, topic),
                )

        self.app.push_screen(
            AskScreen(
                "Publish the rows to Kafka topic:",
                placeholder="topic name",
                value=f"{self.view.name}-out" if self.view else "",
            ),
            publish,
        )

    def action_move(self) -> None:
        if self.view is None:
            return
        here = self.view.cluster
        others = [c.name for c in self.app.plane.clusters() if c.team == self.view.team and c.name != here]

        def move(cluster: str | None) -> None:
            if cluster:
                self._do(
                    f"{self.ref}: moving from {here} to {cluster} (the old cluster stops it, the new one "
                    "resumes it from its checkpoint)",
                    lambda: self.app.plane.move(self.ref, cluster),
                )

        self.app.push_screen(
            AskScreen(
                f"Move {self.ref} from {here} to cluster:",
                placeholder=", ".join(others) or "no other cluster of the team",
            ),
            move,
        )

    def action_delete(self) -> None:
        def delete(yes: bool | None) -> None:
            if yes and self._do(f"{self.ref}: deleted", lambda: self.app.plane.delete(self.ref)):
                self.app.pop_screen()

        self.app.push_screen(
            ConfirmScreen(
                f"Delete {self.ref}?", "It is stopped; its versions and audit trail stay in the registry."
            ),
            delete,
        )

    def action_rollback(self) -> None:
        version = self.selected_version()
        if version is None or self.view is None or version == self.view.current_version:
            self.notify("select an earlier version in the Versions tab first", severity="warning")
            return
        try:
            compat = self.app.plane.check_edit(self.ref, self.app.plane.version(self.ref, version).spec_text)
        except DaggerError as exc:
            self.app.report(exc)
            return

        def rollback(yes: bool | None) -> None:
            if yes:
                self._do(
                    f"{self.ref}: rolled back to v{version}",
                    lambda: self.app.plane.rollback(self.ref, version, allow_fresh_start=not compat.resume),
                )

        self.app.push_screen(
            ConfirmScreen(f"Roll {self.ref} back to v{version}?", f"The new version {compat.summary()}."),
            rollback,
        )

    def action_preview(self) -> None:
        self.notify(
            f"previewing {self.ref} over the last {counted(self.app.preview_minutes, 'minute', fmt='g')}…"
        )
        self._preview()

    @work(thread=True, exclusive=True, group="preview")
    def _preview(self) -> None:
        started = time.monotonic()
        try:
            table = self.app.plane.preview(
                self.ref, minutes=self.app.preview_minutes, limit=50, spark=self.app.spark_session()
            )
        except DaggerError as exc:
            land(self, self.failed, exc)
            return
        title = (
            f"preview of {self.ref}: {counted(table.num_rows, 'row')} in {time.monotonic() - started:.1f} s"
        )
        land(self, self._show_rows, title, table.column_names, table.to_pylist())

    def _show_rows(self, title: str, columns: list[str], rows: list[dict[str, object]]) -> None:
        self.app.push_screen(RowsScreen(title, columns, rows))

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "output-tab":
            self.query_one(OutputPane).load()

    def action_tab(self, tab: str) -> None:
        """Show a tab (1 spec, 2 versions, 3 audit, 4 output) and focus its table."""
        self.query_one(TabbedContent).active = tab
        target = {"versions-tab": "#versions", "audit-tab": "#audit"}.get(tab)
        if target:
            self.query_one(target, DataTable).focus()

    def action_back(self) -> None:
        self.app.pop_screen()
