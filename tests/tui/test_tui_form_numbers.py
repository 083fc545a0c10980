"""The console's dagger form says a bad number as the spec's other paths do: the form field's label, the value
typed and what the field allows (job.spec.numbers), never pydantic's wording."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.widgets import Input, Static

from job.control import ControlPlane, Registry
from tests.tui.tui_world import NOW, build, settle, until
from tui.app import DaggersApp
from tui.form import DaggerFormScreen


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """The console tests' registry; these tests only read it (the form is never saved)."""
    reg = Registry(f"sqlite:///{tmp_path_factory.mktemp('world') / 'registry.db'}")
    build(reg)
    yield reg
    reg.close()


def shown(label: Static) -> str:
    content = label.content
    return str(getattr(content, "plain", content))


#: (the form field, what is typed in it, what the form then says)
CASES = [
    ("#parallelism", "-3", "✗ Parallelism: -3 is not a whole number from 1 to 1024"),
    ("#parallelism", "2000", "✗ Parallelism: 2000 is not a whole number from 1 to 1024"),
    ("#watermark", "-5", "✗ Watermark delay (ms): -5 is not a whole number of at least 0"),
]


@pytest.mark.asyncio
async def test_a_bad_number_in_the_form_names_the_value(world: Registry) -> None:
    app = DaggersApp(ControlPlane(world, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_dagger("dag-07")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await settle(app)
        label = form.query_one("#validation", Static)
        for field, typed, problem in CASES:
            box = form.query_one(field, Input)
            before = box.value
            box.value = ""
            box.focus()
            await pilot.press(*["minus" if ch == "-" else ch for ch in typed])
            assert box.value == typed
            await until(pilot, lambda p=problem: shown(label) == p, f"the form to say {problem!r}")
            box.value = before
            await until(pilot, lambda: not shown(label).startswith("✗"), "the form valid again")
