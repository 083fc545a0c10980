"""The operator console: ``daggers tui``.

Keyboard first: every screen has a footer of its bindings, and ctrl+p opens Textual's command
palette with "open cluster …", "open dagger …" and "new dagger on …". The console only calls
:class:`job.control.protocol.Plane` (the embedded ControlPlane or a server's RemoteControlPlane), which
checks the user's rights: a team's daggers are invisible to other teams here exactly as on the command line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from job.common.text import safe_text
from job.control.protocol import Plane
from job.control.views import DaggerView
from job.errors import DaggerError
from tui.actions import ConsoleApp
from tui.cluster_health import ClusterHealthScreen
from tui.clusters import ClustersScreen
from tui.daggers import DaggersScreen
from tui.detail import DaggerScreen
from tui.form import DaggerFormScreen

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DaggerCommands(Provider):
    """Command palette entries: open a cluster, open a dagger, create a dagger on a cluster."""

    _listed: list[tuple[str, Callable[[], Any], str]]  # the entries, listed at the palette's opening

    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app = self.app
        assert isinstance(app, DaggersApp)
        out: list[tuple[str, Callable[[], Any], str]] = []
        try:
            clusters = app.plane.clusters()
            daggers = app.plane.daggers()
        except DaggerError:
            return out
        for c in clusters:
            out.append(
                (f"open cluster {c.name}", partial(app.open_cluster, c.name), f"{c.datacentre} · {c.team}")
            )
            out.append(
                (f"spark workers of {c.name}", partial(app.open_spark, c.name), "workers and applications")
            )
            out.append(
                (f"new dagger on {c.name}", partial(app.new_dagger, c.name), "open the new-dagger form")
            )
        for d in daggers:
            out.append(
                (f"open dagger {d.ref}", partial(app.open_dagger, d.ref), f"{d.cluster} · {d.actual_state}")
            )
        out.append(("alerts feed", app.open_alerts, "active alerts of your teams"))
        return out

    async def startup(self) -> None:
        """List the clusters and daggers once per opening of the palette, not at each key typed (a key read
        them all, with every dagger's health, from the registry or over HTTP from the server)."""
        self._listed = self._commands()

    async def discover(self) -> Hits:
        for text, callback, help_text in self._listed:
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._listed:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)


class DaggersApp(ConsoleApp):
    """The console, acting as ``plane.user``.

    ``spark``: a session for previews (default: one started on the first preview, kept warm);
    ``clock``: the time used for ages (tests pin it); ``refresh_s``: how often screens reload (0: never);
    ``warm_preview``: start the preview session as soon as a dagger form opens; ``alerts_url``: the alert
    store (``alerting.AlertStore`` URL) the alerts feed reads.
    """

    TITLE = "Daggers"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {DaggerCommands}
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False)]

    def __init__(
        self,
        plane: Plane,
        *,
        spark: SparkSession | None = None,
        clock: Callable[[], float] = time.time,
        refresh_s: float = 1.0,
        preview_minutes: float = 5.0,
        warm_preview: bool = True,
        alerts_url: str | None = None,
    ) -> None:
        super().__init__()
        self.plane = plane
        self.clock = clock
        plane.clock = clock  # health is judged at the console's time
        self.refresh_s = refresh_s
        self.preview_minutes = preview_minutes
        self.warm_preview = warm_preview
        self.alerts_url = alerts_url
        self._alerts: Any = None
        self._spark = spark
        self._spark_lock = threading.Lock()
        self.me = plane.whoami()
        self.sub_title = self.identity_line()

    def on_mount(self) -> None:
        self.push_screen(ClustersScreen())

    def spark_session(self) -> SparkSession:
        """Return the session previews run on, starting it on first use (from a worker thread)."""
        with self._spark_lock:
            if self._spark is None:
                from job.spark.session import build_session

                self._spark = build_session(
                    "daggers-console-preview", master="local[2]", shuffle_partitions=2
                )
            return self._spark

    def warm_spark(self) -> None:
        """Start the preview session in the background (the new-dagger form calls this on opening), so the
        first Preview shows rows within seconds instead of waiting for Spark to start."""
        if self._spark is None and self.warm_preview:
            self.run_worker(
                self.spark_session, thread=True, exclusive=True, group="spark", exit_on_error=False
            )

    def open_cluster(self, name: str) -> None:
        """Show the daggers of cluster ``name``."""
        try:
            self.plane.cluster(name)
        except DaggerError as exc:
            self.report(exc)
            return
        self.push_screen(DaggersScreen(name))

    def open_spark(self, cluster: str) -> None:
        """Show cluster ``cluster``'s Spark master, workers and applications (probed live)."""
        try:
            self.plane.cluster(cluster)
        except DaggerError as exc:
            self.report(exc)
            return
        self.push_screen(ClusterHealthScreen(cluster))

    def open_dagger(self, ref: str) -> None:
        """Show dagger ``ref`` (an error notification when it is not visible to the user)."""
        try:
            self.plane.dagger(ref)
        except DaggerError as exc:
            self.report(exc)
            return
        self.push_screen(DaggerScreen(ref))

    def new_dagger(self, cluster: str) -> None:
        """Open the new-dagger form for ``cluster``."""
        try:
            self.plane.cluster(cluster)
        except DaggerError as exc:
            self.report(exc)
            return
        self.push_screen(DaggerFormScreen(cluster))

    def open_alerts(self) -> None:
        """Show the alerts feed of the user's teams (an error notification when no store is configured)."""
        if not self.alerts_url:
            self.notify(
                "no alert store configured: start the console with --alerts-store URL "
                "(or DAGGERS_ALERTS_STORE)",
                title="Alerts",
                severity="warning",
            )
            return
        from alerting import AlertStore, StoreError
        from tui.alerts import AlertsScreen

        try:
            self._alerts = self._alerts or AlertStore(self.alerts_url, create=False)
        except StoreError as exc:
            self.notify(
                safe_text(str(exc), multiline=True), title="Alert store", severity="error", markup=False
            )
            return
        self.push_screen(AlertsScreen(self._alerts))

    def edit_dagger(self, dagger: DaggerView) -> None:
        """Open the form on ``dagger``'s current spec; saving makes a new version."""
        self.push_screen(DaggerFormScreen(dagger.cluster, dagger))
