"""The test modules' durations (scripts/test_durations.py) that tests/conftest.py orders the run by."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "test_durations_script", ROOT / "scripts" / "test_durations.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_module_seconds_sums_each_modules_tests_and_leaves_out_the_short_ones(tmp_path: Path) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text("""<testsuites><testsuite>
<testcase classname="tests.job.test_a" name="one" time="40.5"/>
<testcase classname="tests.job.test_a" name="two" time="9.5"/>
<testcase classname="tests.job.shared.test_b" name="one" time="70"/>
<testcase classname="tests.test_c" name="one" time="1.5"/>
</testsuite></testsuites>""")
    got = _script().module_seconds(junit)
    assert got == {"tests/job/shared/test_b.py": 70.0, "tests/job/test_a.py": 50.0}
    assert list(got) == ["tests/job/shared/test_b.py", "tests/job/test_a.py"]  # longest first


def test_a_method_of_a_test_class_counts_for_its_module() -> None:
    script = _script()
    assert script.module_path("tests.test_durations.TestSomething") == "tests/test_durations.py"
    assert script.module_path("tests.test_durations") == "tests/test_durations.py"


def test_the_recorded_durations_name_modules_that_exist() -> None:
    durations = json.loads((ROOT / "tests" / "durations.json").read_text())
    assert durations and all((ROOT / path).is_file() for path in durations), [
        p for p in durations if not (ROOT / p).is_file()
    ]


class _Item:
    """What tests/conftest.py's ordering reads of a collected test."""

    def __init__(self, path: str, markers: tuple[str, ...] = (), fixtures: tuple[str, ...] = ()) -> None:
        self.path = ROOT / path
        self.module = SimpleNamespace(__name__=path.removesuffix(".py").replace("/", "."))
        self.fixturenames = list(fixtures)
        self.markers = set(markers)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def add_marker(self, marker: object) -> None:
        self.markers.add(getattr(marker, "name", str(marker)))


def test_modules_not_in_the_durations_run_by_kind_slow_then_integration_then_unit() -> None:
    from tests.conftest import DURATIONS, pytest_collection_modifyitems

    known = max(json.loads(DURATIONS.read_text()).items(), key=lambda kv: kv[1])[0]
    items = [
        _Item("tests/new/test_unit.py"),
        _Item("tests/new/test_uses_a_broker.py", fixtures=("tansu_broker",)),
        _Item("tests/new/test_unit.py"),
        _Item("tests/new/test_marked.py", markers=("integration",)),
        _Item("tests/new/test_slow.py", markers=("slow", "integration")),
        _Item(known),
    ]
    config = type("Config", (), {"rootpath": ROOT})
    pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    assert [str(i.path.relative_to(ROOT)) for i in items] == [
        known,
        "tests/new/test_slow.py",
        "tests/new/test_uses_a_broker.py",  # marked integration by its service fixture, then ordered
        "tests/new/test_marked.py",
        "tests/new/test_unit.py",
        "tests/new/test_unit.py",
    ]
