"""Answers that land late, and screens that refresh themselves.

A worker thread's answer (the plane read on a busy machine, a probe, a preview) may come after the operator
left its screen. Textual then takes the screen's widgets down one by one: a widget whose children are already
gone is still mounted, and its worker is not cancelled yet, so an answer that queried a child then raised
``NoMatches`` and the whole console exited. :func:`land` hands an answer to the app's thread only while its
widget is still on the screen stack; a late one is dropped (nobody is looking at it).

:class:`RefreshingScreen` reads (:meth:`~RefreshingScreen.fetch`, any thread) and draws
(:meth:`~RefreshingScreen.draw`, the app's thread): :meth:`~RefreshingScreen.reload` does both at once (on
mount, on coming back from under another screen, after an action); every ``refresh_s`` a worker thread reads,
so a slow plane never freezes the keyboard, and its answer lands through :func:`land`. One refresh at a time,
and none while another screen covers this one (it reloads when it comes back). Its timer stops with the screen
(Textual stops a screen's timers as its removal starts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ScreenStackError
from textual.dom import DOMNode, NoScreen
from textual.screen import Screen
from textual.types import NoActiveAppError

from job.errors import DaggerError

if TYPE_CHECKING:
    from tui.actions import ConsoleApp


def on_stack(node: DOMNode) -> bool:
    """Return True while ``node`` is mounted on a screen of the app's stack (on top, or under another one);
    False once its screen was popped (its widgets are being taken down) or it left the DOM."""
    try:
        screen = node if isinstance(node, Screen) else node.screen
        return (
            bool(getattr(node, "is_mounted", True)) and node.is_attached and screen in node.app.screen_stack
        )
    except (NoScreen, NoActiveAppError, ScreenStackError):
        return False


def land(node: DOMNode, callback: Callable[..., Any], *args: Any) -> None:
    """From a worker thread: run ``callback(*args)`` on the app's thread if ``node`` is still on the screen
    stack then; drop it otherwise (the operator left, or the console is closing)."""
    try:
        app = node.app
    except NoActiveAppError:  # it left the DOM already
        return

    def if_shown() -> None:
        if on_stack(node):
            callback(*args)

    try:
        app.call_from_thread(if_shown)
    except RuntimeError:  # the app is not running any more
        return


class RefreshingScreen(Screen[None]):
    """A screen that shows what it reads, read again every ``app.refresh_s`` in a worker thread (see the
    module docstring). Subclasses give :meth:`fetch` and :meth:`draw`, and call :meth:`refresh_every` on mount."""

    app: ConsoleApp
    #: What a read may raise that :meth:`failed` reports (anything else is a bug, and surfaces).
    errors: ClassVar[tuple[type[Exception], ...]] = (DaggerError,)
    #: Whether the screen reads again when it comes back from under another one.
    reload_on_resume: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._refreshing = False
        self._covered = False  # another screen covered this one since it last read

    def on_screen_suspend(self) -> None:
        self._covered = True

    def on_screen_resume(self) -> None:
        """Read and draw again when the screen comes back from under another one (if ``reload_on_resume``);
        not as it is first shown, when its ``on_mount`` has just read (Textual resumes a screen as it is pushed:
        that read it twice)."""
        if self._covered and self.reload_on_resume:
            self.reload()
        self._covered = False

    def fetch(self) -> Any:
        """Read what the screen shows (in any thread: no widget here)."""
        raise NotImplementedError

    def draw(self, data: Any) -> None:
        """Show ``data``, as :meth:`fetch` returned it (on the app's thread)."""
        raise NotImplementedError

    def failed(self, exc: Exception) -> None:
        """Say that a read failed (a DaggerError by default)."""
        if isinstance(exc, DaggerError):
            self.app.report(exc)

    def reload(self) -> None:
        """Read and draw now."""
        try:
            data = self.fetch()
        except self.errors as exc:
            self.failed(exc)
            return
        self.draw(data)

    def refresh_every(self) -> None:
        """Read again every ``app.refresh_s`` seconds (never when it is 0), while this screen is shown."""
        if self.app.refresh_s:
            self.set_interval(self.app.refresh_s, self._tick, name="refresh")

    def _tick(self) -> None:
        if self._refreshing or not self.is_active:
            return
        self._refreshing = True
        self._refresh()

    @work(thread=True, group="refresh")
    def _refresh(self) -> None:
        try:
            data = self.fetch()
        except self.errors as exc:
            land(self, self.failed, exc)
        else:
            land(self, self.draw, data)
        finally:
            self._refreshing = False
