"""Run the Atlas for real and drive it in headless Chromium: used by the browser test, the benchmark
and the README screenshot.

* :func:`serve_atlas` starts ``streamlit run web_atlas/app.py`` exactly as ``daggers atlas`` does
  (:func:`job.cli.atlas.streamlit_argv`) on a port from the OS, waits for its health check, and
  stops its whole process group afterwards (with ``setpriv --pdeathsig KILL`` it also dies with
  its parent).
* :func:`chromium` launches Debian's Chromium through Playwright (never ``playwright install``).
* :class:`AtlasPage` wraps a page: it records console errors, page errors and every host the page
  requests, chooses sidebar options, and hovers a cell to read its tooltip.

Playwright is imported only by the functions that need it (it is a development dependency).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import requests

from job.cli.atlas import atlas_env, streamlit_argv
from job.common.exits import how_it_ended
from job.stack.ports import free_port
from web_atlas.areas import View, project
from web_atlas.errors import AtlasError

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
DECK_SELECTOR: Final = '[data-testid="stDeckGlJsonChart"]'
TOOLTIP_SELECTOR: Final = ".deck-tooltip"


@dataclass(frozen=True)
class AtlasServer:
    """A running Atlas: its ``url`` (``http://127.0.0.1:<port>``), process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        """Return the last ``lines`` lines of the Streamlit log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop ``process`` and its process group: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


@contextlib.contextmanager
def serve_atlas(
    influx_url: str,
    database: str,
    log_path: Path,
    *,
    port: int | None = None,
    timeout: float = 90.0,
    extra_env: dict[str, str] | None = None,
) -> Iterator[AtlasServer]:
    """Start the Atlas against ``influx_url``/``database`` on ``port`` (default: one from the OS) and
    yield it once ``/_stcore/health`` answers; stop it on exit.

    Raises:
        AtlasError: it exits or is not healthy within ``timeout`` seconds (with the log's last lines).
    """
    port = port or free_port()
    argv = streamlit_argv(port)
    if shutil.which("setpriv"):
        argv = ["setpriv", "--pdeathsig", "KILL", *argv]
    env = atlas_env(influx_url, database)
    env.update(extra_env or {})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = AtlasServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise AtlasError(
                    f"the Atlas {how_it_ended(process.returncode, after_name=True)}:\n{server.log_tail()}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{server.url}/_stcore/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise AtlasError(f"the Atlas did not answer within {timeout:.0f} s:\n{server.log_tail()}")
            time.sleep(0.25)
        yield server
    finally:
        _stop(process)


def chromium(pw: Playwright) -> Browser:
    """Return Debian's headless Chromium launched through Playwright.

    Raises:
        AtlasError: ``/usr/bin/chromium`` is not installed.
    """
    if not Path(CHROMIUM).is_file():
        raise AtlasError(f"{CHROMIUM} is not installed", hint="apt-get install chromium")
    return pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))


@dataclass
class AtlasPage:
    """A browser page on the Atlas that records what went wrong and which hosts it asked."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))
        self.page.on("request", self._on_request)

    def _on_request(self, request: Any) -> None:
        """Record the host of every network request (``blob:`` and ``data:`` URLs stay in the page)."""
        parts = urlsplit(request.url)
        if parts.scheme not in ("blob", "data", "about"):
            self.hosts.add(parts.netloc)

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def open(self, url: str, timeout_s: float = 90.0) -> None:
        """Load the Atlas at ``url`` and wait until the map and its caption are shown."""
        self.page.goto(url, wait_until="domcontentloaded")
        self.wait_idle(timeout_s)
        self.page.wait_for_selector(f"{DECK_SELECTOR} canvas", timeout=timeout_s * 1000)

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Wait until Streamlit has finished running the script (the status widget is gone and the
        caption under the map is there)."""
        self.page.wait_for_function(
            """() => !document.querySelector('[data-testid="stStatusWidget"]')
                     && [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
                          .some(e => e.innerText.includes('map built in'))""",
            timeout=timeout_s * 1000,
        )

    def caption(self) -> str:
        """Return the text of the caption under the map (window, read and build times)."""
        captions = self.page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
        return next((c for c in captions if "map built in" in c), "")

    def choose(self, label: str, option: str, timeout_s: float = 60.0) -> None:
        """Pick ``option`` in the sidebar select box labelled ``label``, then wait for the rerun to end."""
        box = self.page.get_by_test_id("stSelectbox").filter(has=self.page.get_by_text(label, exact=True))
        for attempt in range(3):  # a rerun that redraws the sidebar can close the list just opened
            box.locator('[role="combobox"], input').first.click()
            try:
                self.page.get_by_role("option", name=option, exact=True).click(timeout=5000)
                break
            except Exception:  # playwright's TimeoutError
                self.page.keyboard.press("Escape")
                if attempt == 2:
                    raise AtlasError(f"cannot pick {option!r} in the select box {label!r}") from None
        # The status widget shows while the script runs; a very quick run may end before we look.
        with contextlib.suppress(Exception):  # playwright's TimeoutError
            self.page.wait_for_selector('[data-testid="stStatusWidget"]', state="attached", timeout=2000)
        self.wait_idle(timeout_s)

    def metric(self, label: str) -> str:
        """Return the value shown by the metric labelled ``label`` ("" when there is none)."""
        metric = self.page.get_by_test_id("stMetric").filter(has=self.page.get_by_text(label, exact=True))
        if metric.count() == 0:
            return ""
        return metric.first.get_by_test_id("stMetricValue").inner_text().strip()

    def wait_for_metric(self, label: str, value: str, timeout_s: float = 60.0) -> None:
        """Wait until the metric ``label`` shows ``value`` (e.g. the map's cell count after a change).

        Raises:
            AtlasError: it does not within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        while self.metric(label) != value:
            if time.monotonic() > deadline:
                raise AtlasError(f"metric {label!r} shows {self.metric(label)!r}, not {value!r}")
            self.page.wait_for_timeout(50)

    def deck_box(self) -> dict[str, float]:
        """Return the deck canvas's bounding box (``x``, ``y``, ``width``, ``height`` in page pixels)."""
        box = self.page.locator(f"{DECK_SELECTOR} canvas").first.bounding_box()
        if box is None:
            raise AtlasError("the map is not on the page")
        return {"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]}

    def _tooltip_text(self) -> str | None:
        tooltip = self.page.locator(TOOLTIP_SELECTOR)
        if tooltip.count() == 0 or not tooltip.first.is_visible():
            return None
        return tooltip.first.inner_text().strip() or None

    def hover(self, lat: float, lng: float, view: View, settle_ms: int = 400) -> str | None:
        """Move the mouse off the map, then over ``(lat, lng)`` on a map showing ``view``; return the
        tooltip text after ``settle_ms`` (deck.gl picks asynchronously), or None without a tooltip."""
        box = self.deck_box()
        self.page.mouse.move(box["x"] - 20, box["y"] - 20)
        self.page.wait_for_timeout(50)
        dx, dy = project(lat, lng, view)
        self.page.mouse.move(box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2 + dy, steps=3)
        self.page.wait_for_timeout(settle_ms)
        return self._tooltip_text()

    def tooltip(
        self, lat: float, lng: float, view: View, expect: str, timeout_s: float = 30.0, settle_ms: int = 250
    ) -> str:
        """Hover ``(lat, lng)`` until the tooltip contains ``expect`` (the layer is drawn and pickable);
        return its text.

        Raises:
            AtlasError: no such tooltip within ``timeout_s`` seconds (the message has the last text seen).
        """
        deadline = time.monotonic() + timeout_s
        last: str | None = None
        while time.monotonic() < deadline:
            last = self.hover(lat, lng, view, settle_ms=settle_ms)
            if last and expect in last:
                return last
        raise AtlasError(f"no tooltip with {expect!r} at ({lat}, {lng}); last seen: {last!r}")


__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "AtlasPage", "AtlasServer", "chromium", "serve_atlas"]
