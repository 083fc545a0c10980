"""The console's screens keep Textual's own attributes: none of their methods hides one of Textual's
properties (the alerts screen's ``visible(labels)`` once hid ``Screen.visible``, so ``screen.visible`` was a
bound method, always true)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.screen import Screen

import tui
from tui.alerts import AlertsScreen


def _screens() -> list[type[Screen]]:
    found: set[type[Screen]] = set()
    for info in pkgutil.iter_modules(tui.__path__):
        module = importlib.import_module(f"tui.{info.name}")
        found |= {
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, Screen) and c.__module__.startswith("tui.")
        }
    return sorted(found, key=lambda c: c.__qualname__)


def _hidden_properties(cls: type) -> list[str]:
    """The names ``cls`` defines as something else where a Textual base class has a property."""
    textual = [base for base in cls.__mro__ if base.__module__.startswith("textual.")]
    return sorted(
        name
        for name, value in vars(cls).items()
        if not isinstance(value, property)
        and any(isinstance(vars(base).get(name), property) for base in textual)
    )


def test_no_screen_hides_a_textual_property() -> None:
    screens = _screens()
    assert AlertsScreen in screens
    assert {s.__qualname__: _hidden_properties(s) for s in screens} == {s.__qualname__: [] for s in screens}


def test_a_hidden_property_is_found() -> None:
    class Shadowing(Screen[None]):
        def visible(self, labels: dict[str, str]) -> bool:  # type: ignore[override]  # the fault to find
            return bool(labels)

    assert _hidden_properties(Shadowing) == ["visible"]


def test_the_alerts_screen_shows_and_hides_as_textual_says() -> None:
    screen = AlertsScreen(store=None)
    assert screen.visible is True
    screen.visible = False
    assert (screen.visible, screen.styles.visibility) == (False, "hidden")
