"""What the console's screens may ask of the app: its state and its navigation.

The screens are typed against :class:`ConsoleApp`, never against :class:`tui.app.DaggersApp`, so the app
imports its screens and no screen imports the app (no import circle). :class:`tui.app.DaggersApp` is the
one implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.app import App

from job.common.text import safe_text
from job.control.protocol import Plane
from job.control.views import DaggerView
from job.errors import DaggerError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class ConsoleApp(App[None]):
    """The operator console as its screens see it.

    ``plane``: the control plane, acting as the console's user; ``me``: its ``whoami()``; ``clock``: the
    time used for ages; ``refresh_s``: how often screens reload (0: never); ``preview_minutes``: how much
    of the topics a preview reads.
    """

    plane: Plane
    me: dict[str, Any]
    clock: Callable[[], float]
    refresh_s: float
    preview_minutes: float

    def identity_line(self) -> str:
        """Return ``user · team: role, …`` for the header."""
        teams = ", ".join(f"{t}: {r}" for t, r in self.me["teams"].items()) or "no team"
        return f"{self.me['user']}{' (superuser)' if self.me['superuser'] else ''} · {teams}"

    def report(self, exc: DaggerError) -> None:
        """Show a known error as a notification: title, message and hint (as text: an error may quote a
        user's input)."""
        self.notify(
            safe_text(exc.message + (f"\nhint: {exc.hint}" if exc.hint else ""), multiline=True),
            title=safe_text(exc.title),
            severity="error",
            timeout=8,
            markup=False,
        )

    def spark_session(self) -> SparkSession:
        """Return the session previews run on."""
        raise NotImplementedError

    def warm_spark(self) -> None:
        """Start the preview session in the background."""
        raise NotImplementedError

    def open_cluster(self, name: str) -> None:
        """Show the daggers of cluster ``name``."""
        raise NotImplementedError

    def open_spark(self, cluster: str) -> None:
        """Show cluster ``cluster``'s Spark master, workers and applications (probed live)."""
        raise NotImplementedError

    def open_dagger(self, ref: str) -> None:
        """Show dagger ``ref``."""
        raise NotImplementedError

    def new_dagger(self, cluster: str) -> None:
        """Open the new-dagger form for ``cluster``."""
        raise NotImplementedError

    def edit_dagger(self, dagger: DaggerView) -> None:
        """Open the form on ``dagger``'s current spec."""
        raise NotImplementedError

    def open_alerts(self) -> None:
        """Show the alerts feed of the user's teams."""
        raise NotImplementedError
