"""The first screen: the user's clusters grouped by data centre, with their health at a glance (``w``
opens a cluster's Spark workers and applications)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from job.common.text import safe_text
from job.common.words import counted
from job.control.health_model import HealthSettings
from job.control.views import ClusterView
from job.errors import DaggerError
from tui.actions import ConsoleApp
from tui.format import age, number, part_text, plain, spark_detail, state_text
from tui.late import RefreshingScreen, land

COLUMNS = ("cluster", "team", "master", "health", "daggers", "spark", "kafka", "influx", "controller")


class ClustersScreen(RefreshingScreen):
    """Clusters by data centre. Enter opens a cluster's daggers; ``h`` probes health live from here."""

    reload_on_resume = True

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("n", "new", "New dagger"),
        Binding("h", "probe", "Live health"),
        Binding("w", "spark", "Spark workers"),
        Binding("a", "alerts", "Alerts"),
        Binding("r", "reload", "Refresh"),
        Binding("q", "app.quit", "Quit"),
    ]

    app: ConsoleApp

    def __init__(self) -> None:
        super().__init__()
        self.clusters: list[ClusterView] = []
        self.live: dict[str, dict[str, Any]] = {}
        self.probe_stale_s = HealthSettings().probe_stale_s  # the plane's, once mounted

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="whoami")
        yield DataTable(id="clusters", cursor_type="row", zebra_stripes=True)
        yield Static(id="summary")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        settings = getattr(self.app.plane, "health_settings", None)  # a plane through a server has none
        self.probe_stale_s = (settings or HealthSettings.from_env()).probe_stale_s
        self.query_one("#whoami", Static).update(plain(self.app.identity_line()))
        self.reload()
        self.refresh_every()

    def fetch(self) -> list[ClusterView]:
        """Read the clusters and their recorded health."""
        return self.app.plane.clusters()

    def draw(self, data: list[ClusterView]) -> None:
        """Redraw the table (keeping the cursor)."""
        self.clusters = data
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        now = self.app.clock()
        dc = None
        for c in self.clusters:
            if c.datacentre != dc:
                dc = c.datacentre
                table.add_row(plain(f"▾ {dc}", "bold"), *[""] * (len(COLUMNS) - 1), key=f"dc:{dc}")
            health, verdict = self.shown(c, now)
            parts, probe_age = verdict.get("parts") or {}, verdict.get("probe_age_s")
            reporting = parts.get("controller") == "ok"  # the health model's verdict
            ctl = (
                Text(f"● {age(now, c.controller_heartbeat)} ago", style="green")
                if reporting
                else Text(
                    f"○ silent {age(now, c.controller_heartbeat)}" if c.controller_heartbeat else "○ none",
                    style="bold red",
                )
            )
            table.add_row(
                plain(f"  {c.name}"),
                plain(c.team),
                plain(c.spark_master),
                state_text(verdict.get("state") or "unknown"),
                f"{c.daggers_running}/{c.daggers_total}",
                part_text(parts.get("spark"), spark_detail(health.get("spark")), probe_age),
                part_text(
                    parts.get("kafka"), f"{number((health.get('kafka') or {}).get('partitions'))}p", probe_age
                ),
                part_text(parts.get("influx"), "", probe_age),
                ctl,
                key=f"cluster:{c.name}",
            )
        if table.row_count:  # keep the cursor; at first, on the first cluster rather than its data centre
            table.move_cursor(row=min(keep or 1, table.row_count - 1))
        teams = sorted({c.team for c in self.clusters})
        self.query_one("#summary", Static).update(
            plain(
                f"{counted(len(self.clusters), 'cluster')} in {counted(len({c.datacentre for c in self.clusters}), 'data centre')} · "
                f"teams: {', '.join(teams) or '-'}"
            )
        )

    def shown(self, c: ClusterView, now: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return the probe and the health model's verdict row ``c`` shows: those of a live probe (``h``) while
        it is newer than the one the controller recorded and not stale yet, else the recorded ones (a recorded
        probe that is old shows its parts ``stale``, with its age)."""
        live = self.live.get(c.name)
        if live is not None:
            at = float(live.get("checked_at") or 0.0)
            if at >= (c.health_at or 0.0) and now - at <= self.probe_stale_s:
                return live, live.get("state") or {}
            del self.live[c.name]
        return c.health or {}, c.state

    def selected(self) -> ClusterView | None:
        """Return the cluster under the cursor (None on a data-centre row)."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        name = key.removeprefix("cluster:") if key.startswith("cluster:") else None
        return next((c for c in self.clusters if c.name == name), None)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        cluster = self.selected()
        if cluster is not None:
            self.app.open_cluster(cluster.name)

    def action_new(self) -> None:
        cluster = self.selected()
        if cluster is not None:
            self.app.new_dagger(cluster.name)

    def action_spark(self) -> None:
        cluster = self.selected()
        if cluster is not None:
            self.app.open_spark(cluster.name)

    def action_alerts(self) -> None:
        self.app.open_alerts()

    def action_reload(self) -> None:
        self.reload()

    def action_probe(self) -> None:
        cluster = self.selected()
        if cluster is not None:
            self.notify(f"probing {cluster.name}…")
            self._probe(cluster.name)

    @work(thread=True, exclusive=True, group="probe")
    def _probe(self, name: str) -> None:
        try:
            health = self.app.plane.cluster_health(name, live=True)
        except DaggerError as exc:
            land(self, self.failed, exc)
            return
        land(self, self._probed, name, health)

    def _probed(self, name: str, health: dict[str, Any]) -> None:
        self.live[name] = health
        self.reload()
        verdict = health.get("state") or {}
        reasons = "; ".join(verdict.get("reasons") or [])
        self.notify(
            safe_text(f"{name}: {verdict.get('state', 'unknown')}" + (f" ({reasons})" if reasons else "")),
            severity="information" if health["ok"] else "warning",
            markup=False,
        )
