"""The documentation site builds with ``mkdocs build --strict`` (a broken link, anchor, nav entry or snippet
fails it), and its reference pages are generated from the code: every spec field, every command and every
alerting field is on them, so they cannot drift."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.blocks import ROOT


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("daggers_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def test_the_site_builds_strict_with_every_page_of_the_nav(site: Path) -> None:
    for page in (
        "getting-started",
        "concepts",
        "howto/write-a-dagger",
        "howto/migrate-from-dagger",
        "reference/spec",
        "reference/cli",
        "reference/alerts",
        "reference/python",
        "sql",
        "functions",
        "operations/sizing",
        "architecture",
        "benchmarks",
    ):
        assert (site / page / "index.html").is_file(), page
    assert (site / "index.html").is_file()
    assert not (site / "hooks.py").exists()  # the hook is not published


def test_no_page_fetches_fonts_from_google(site: Path) -> None:
    assert [p.name for p in site.rglob("*.html") if "fonts.googleapis" in p.read_text()] == []


def test_the_spec_reference_has_every_field_of_every_model(site: Path) -> None:
    from job.spec import DaggerSpec, InfluxSinkSpec, KafkaSinkSpec, PostgresSinkSpec, StreamSpec

    html = _page(site, "reference/spec")
    for model in (DaggerSpec, StreamSpec, InfluxSinkSpec, KafkaSinkSpec, PostgresSinkSpec):
        assert f'id="{model.__name__.lower()}"' in html, model.__name__
        for name, field in model.model_fields.items():
            assert f"<code>{field.alias or name}</code>" in html, f"{model.__name__}.{name}"


def test_a_spec_field_row_has_its_type_default_and_description() -> None:
    md = _hooks().spec_reference()
    assert (
        "| `watermark_delay_ms` | int | `10000` | How late an event may be and still count in its window. |"
        in md.splitlines()
    )
    assert "| `streams` | list[[StreamSpec](#streamspec)] | *required* | The input streams (1 or 2). |" in md
    assert '| `api` | `"v1"` \\| `"v2"` | `v1` |' in md


def test_the_cli_reference_has_every_command(site: Path) -> None:
    import typer.main

    from job.cli.main import app

    html = _page(site, "reference/cli")
    todo = [(["daggers"], typer.main.get_command(app))]
    seen = 0
    while todo:
        words, command = todo.pop()
        assert f"<code>{' '.join(words)}</code>" in html, words
        seen += 1
        todo += [([*words, name], sub) for name, sub in getattr(command, "commands", {}).items()]
    assert seen > 40
    md = _hooks().cli_reference()
    assert "```\ndaggers sql check [OPTIONS] SPEC\n```" in md
    assert "| `--json` | flag | `false` |  |" in md


def test_the_alerts_reference_has_every_field(site: Path) -> None:
    from alerting.config import AlertsConfig, RouteSpec, SlackChannel
    from alerting.rules import DeadmanRule, ThresholdRule

    html = _page(site, "reference/alerts")
    for model in (AlertsConfig, RouteSpec, SlackChannel, ThresholdRule, DeadmanRule):
        for name, field in model.model_fields.items():
            assert f"<code>{field.alias or name}</code>" in html, f"{model.__name__}.{name}"


def test_the_python_reference_comes_from_the_docstrings(site: Path) -> None:
    from job.spec import parse_spec

    html = _page(site, "reference/python")
    assert "parse_spec" in html and (parse_spec.__doc__ or "").split(";")[0].strip() in html


def test_the_python_api_page_shows_no_sphinx_markup(site: Path) -> None:
    """A docstring's ``:func:`interpolate_env``` reads as ``interpolate_env``, in code."""
    html = _page(site, "reference/python")
    assert ":func:" not in html and ":mod:" not in html
    assert "(see <code>interpolate_env</code>)" in html


def test_an_unknown_generated_section_is_an_error() -> None:
    hooks = _hooks()
    assert hooks.expand("a\n<!-- other comment -->\n") == "a\n<!-- other comment -->\n"
    with pytest.raises(KeyError, match="unknown generated section 'specs'"):
        hooks.expand("<!-- generated: specs -->")


def test_angle_brackets_of_a_docstring_show_as_text(site: Path) -> None:
    """``<state dir>`` in a field's description is text, not an HTML tag the browser would swallow."""
    assert _hooks()._escape("a <state dir> ``x<y`` & `<z>`") == "a &lt;state dir&gt; ``x<y`` &amp; `<z>`"
    assert "(default: &lt;state dir&gt;/checkpoints/&lt;name&gt;)" in _page(site, "reference/spec")


def test_the_links_of_the_pages_outside_the_site_resolve() -> None:
    """README.md, BENCHMARKS.md, the benchmarks' history and the examples' READMEs are read on the repository,
    not built: every relative link (and picture) of theirs names a file that exists."""
    import re

    pages = [
        ROOT / "README.md",
        ROOT / "BENCHMARKS.md",
        ROOT / "bench" / "results" / "history.md",
        *sorted((ROOT / "examples").rglob("*.md")),
    ]
    links = [
        (page, target)
        for page in pages
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
        if "://" not in target
    ]
    assert len(links) >= 20
    assert [f"{p.relative_to(ROOT)} -> {t}" for p, t in links if not (p.parent / t).exists()] == []
