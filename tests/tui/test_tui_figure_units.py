"""A figure of the console reads as a person says it: its unit, then its age when it is old ("batch 9.2k
(9m old) ms" put the age between the value and its unit)."""

from __future__ import annotations

from tui.format import figure


def test_an_old_figure_says_its_unit_before_its_age() -> None:
    old = {"value": 9177.0, "at": 0.0, "age_s": 540.0, "fresh": False}
    fresh = {"value": 4200.0, "at": 0.0, "age_s": 2.0, "fresh": True}
    assert figure(old, "ms") == "9.2k ms (9m old)"
    assert figure(fresh, "rows/s") == "4.2k rows/s"
    assert (figure(None, "ms"), figure(old), figure(None)) == ("- ms", "9.2k (9m old)", "-")
