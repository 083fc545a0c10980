"""A cluster's Spark in detail: the master, each worker (alive, cores, memory, last heartbeat) and the
applications running on it. Opened with ``w`` on the clusters screen; it probes the cluster live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from job.common.words import counted
from job.errors import DaggerError
from tui.format import age, part_text, plain, span, spark_detail
from tui.late import land

if TYPE_CHECKING:
    from tui.actions import ConsoleApp

WORKER_COLUMNS = ("worker", "host", "state", "cores used", "memory used", "heartbeat")
APP_COLUMNS = ("application", "name", "state", "cores", "memory/executor", "running for")


def used_of(used: Any, total: Any, unit: str = "") -> str:
    """Return ``used/total unit``: ``1/1``, ``512/1024 MB``; ``-`` when unknown."""
    if total is None:
        return "-"
    return f"{used or 0}/{total}{' ' + unit if unit else ''}"


def worker_state(state: str | None) -> Text:
    """Return a worker's state, green when ALIVE and red otherwise (DEAD, DECOMMISSIONED, UNKNOWN)."""
    return plain(state or "UNKNOWN", "green" if state == "ALIVE" else "bold red")


def local_note(spark: dict[str, Any]) -> str:
    """Return why a ``local`` cluster lists no workers nor applications ("" for another mode)."""
    if spark.get("mode") != "local":
        return ""
    memory = (
        f" and {spark['memory_mb']:,} MB of memory ({spark.get('memory_used_mb') or 0:,} MB in use)"
        if spark.get("memory_mb")
        else ""
    )
    return (
        f"Local mode ({spark.get('master')}): no Spark workers nor applications to list. Each dagger runs Spark "
        f"inside its own process on the gateway machine itself, with {counted(spark.get('cores') or 0, 'core')}"
        f"{memory}."
    )


class ClusterHealthScreen(Screen[None]):
    """Cluster ``name``'s Spark master, workers and applications, as probed live from the console.

    Before the first probe answers it shows what the cluster's controller recorded last.
    """

    BINDINGS = [
        Binding("h", "probe", "Probe again"),
        Binding("escape", "back", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    app: ConsoleApp

    def __init__(self, name: str) -> None:
        super().__init__()
        self.cluster = name
        self.health: dict[str, Any] = {}
        self.live = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="title")
        yield Static(id="master")
        yield Static(id="local-note")
        yield DataTable(id="workers", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="apps", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#workers", DataTable).add_columns(*WORKER_COLUMNS)
        self.query_one("#apps", DataTable).add_columns(*APP_COLUMNS)
        try:
            self.health = self.app.plane.cluster_health(self.cluster)
        except DaggerError as exc:
            self.app.report(exc)
        self.show()
        self.action_probe()

    def show(self) -> None:
        """Redraw the master line and the two tables from ``self.health``."""
        spark = self.health.get("spark") or {}
        now = self.app.clock()
        recorded = (
            span(float(self.health["age_s"]))
            if self.health.get("age_s") is not None
            else age(now, self.health.get("checked_at"))
        )  # the age the health model judged it by
        how = (
            "live"
            if self.live
            else (f"recorded {recorded} ago" if self.health.get("recorded") else "not probed yet")
        )
        self.query_one("#title", Static).update(
            Text.assemble(("Spark of ", "bold"), plain(self.cluster, "bold"), f"  ({how})")
        )
        # what a Spark master answers (its address, states, errors, applications' names) is shown as text
        verdict = self.health.get("state") or {}  # the health model's, over this probe
        master = Text.assemble(
            plain(spark.get("master") or "-"),
            "  ",
            part_text(  # the title says how old the probe is; a stale part says it again
                (part := (verdict.get("parts") or {}).get("spark")),
                spark_detail(spark),
                verdict.get("probe_age_s") if part == "stale" else None,
            ),
        )
        if spark.get("mode") == "standalone" and spark.get("ok") is not None:
            master.append(
                plain(
                    f"  status {spark.get('status')}  memory "
                    f"{used_of(spark.get('memory_used_mb'), spark.get('memory_mb'), 'MB')}"
                )
            )
        if spark.get("error"):
            master.append(plain(f"  {spark['error']}", "red", multiline=True))
        self.query_one("#master", Static).update(master)
        note = self.query_one("#local-note", Static)
        note.update(plain(local_note(spark)))
        note.display = spark.get("mode") == "local"
        workers = self.query_one("#workers", DataTable)
        workers.clear()
        for w in spark.get("worker_list") or []:
            beat = w.get("last_heartbeat_ms")
            workers.add_row(
                plain(w.get("id") or "-"),
                plain(w.get("host") or "-"),
                worker_state(w.get("state")),
                used_of(w.get("cores_used"), w.get("cores")),
                used_of(w.get("memory_used_mb"), w.get("memory_mb"), "MB"),
                f"{age(now, beat / 1000)} ago" if beat else "-",
                key=str(w.get("id")),
            )
        apps = self.query_one("#apps", DataTable)
        apps.clear()
        for a in spark.get("app_list") or []:
            duration = a.get("duration_ms")
            apps.add_row(
                plain(a.get("id") or "-"),
                plain(a.get("name") or "-"),
                plain(a.get("state") or "-"),
                plain(a.get("cores", "-")),
                f"{a['memory_per_executor_mb']} MB" if a.get("memory_per_executor_mb") else "-",
                span(duration / 1000) if duration is not None else "-",
                key=str(a.get("id")),
            )

    def action_probe(self) -> None:
        self._probe()

    @work(thread=True, exclusive=True, group="probe-spark")
    def _probe(self) -> None:
        try:
            health = self.app.plane.cluster_health(self.cluster, live=True)
        except DaggerError as exc:
            land(self, self._failed, exc)
            return
        land(self, self._probed, health)

    def _failed(self, exc: DaggerError) -> None:
        self.app.report(exc)

    def _probed(self, health: dict[str, Any]) -> None:
        self.health, self.live = health, True
        self.show()

    def action_back(self) -> None:
        self.app.pop_screen()
