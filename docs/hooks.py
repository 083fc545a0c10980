"""mkdocs hook: the reference pages that come from the code, so that they cannot drift from it.

A page holds a marker comment, and the build puts the generated Markdown in its place:

- ``<!-- generated: spec -->``: every field of the dagger spec (``job.spec.DaggerSpec`` and the models under
  it) with its type, default and description, read from the pydantic models;
- ``<!-- generated: alerts -->``: the same for the alert rules file (``alerting.config.AlertsConfig``, the
  rules of ``alerting.rules``);
- ``<!-- generated: cli -->``: every ``daggers`` command with its usage, help and options, read from the typer
  app's click command tree.

The tests (tests/docs/) call the same functions, and ``mkdocs build --strict`` fails on a marker it does not
know. The docstrings' Sphinx roles (``:func:`x```) are dropped from the rendered pages: the name shows as code.
"""

from __future__ import annotations

import html
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs runs the hook from its own script, not from the repository
    sys.path.insert(0, str(ROOT))

from pydantic import BaseModel, SecretStr  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
CODE_SPAN = re.compile(r"(`+).+?\1")


# ---- pydantic models -> field tables ---------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    """Return a short readable name of a field's type (``list[str]``, ``"v1" | "v2"``, ``InfluxSinkSpec``)."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, set, frozenset, tuple, dict):
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]"
    if annotation is type(None):
        return "null"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
        if issubclass(annotation, Enum):
            return " \\| ".join(f"`{m.value}`" for m in annotation)
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """Yield the pydantic models a field's type names (through unions, lists, dicts and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in get_args(annotation):
        yield from _models_in(arg)


def _default(field: FieldInfo) -> str:
    """Return a field's default as the docs show it: *required*, or the YAML-ish value."""
    if field.is_required():
        return "*required*"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "*required*"
    if isinstance(value, BaseModel):
        return "(see below)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, dict | list | set | tuple) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    if isinstance(value, str) and not value:
        return '`""`'
    return f"`{value}`"


def _escape(text: str) -> str:
    """Return ``text`` with ``<``, ``>`` and ``&`` outside code spans written as entities, so that a
    ``<state dir>`` in a docstring shows instead of being read as an HTML tag."""
    out, last = [], 0
    for span in CODE_SPAN.finditer(text):
        out += [html.escape(text[last : span.start()], quote=False), span.group(0)]
        last = span.end()
    return "".join([*out, html.escape(text[last:], quote=False)])


def _cell(text: str) -> str:
    """Return ``text`` fit for one Markdown table cell."""
    return _escape(" ".join(text.split())).replace("|", "\\|")


def model_tables(root: type[BaseModel], heading: str = "###") -> str:
    """Return Markdown: one section per model reachable from ``root`` (``root`` first), each with its docstring
    and a table of its fields (name as written in YAML, type, default, description)."""
    seen: list[type[BaseModel]] = []
    queue = [root]
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            queue.extend(m for m in _models_in(field.annotation) if m not in seen)
    out: list[str] = []
    for model in seen:
        doc = _escape(inspect.cleandoc(model.__doc__ or ""))
        out += [
            f"{heading} {model.__name__}",
            "",
            doc,
            "",
            "| field | type | default | description |",
            "|---|---|---|---|",
        ]
        for name, field in model.model_fields.items():
            key = field.alias or name
            out.append(
                f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | "
                f"{_cell(field.description or '')} |"
            )
        out.append("")
    return "\n".join(out)


def spec_reference() -> str:
    """Return the dagger spec's reference (every model under ``job.spec.DaggerSpec``)."""
    from job.spec import DaggerSpec

    return model_tables(DaggerSpec)


def alerts_reference() -> str:
    """Return the alert configuration's reference: ``alerting.config.AlertsConfig`` and the rule kinds."""
    from alerting.config import AlertsConfig
    from alerting.rules import DeadmanRule, ThresholdRule

    parts = [model_tables(AlertsConfig)]
    parts += [model_tables(rule) for rule in (ThresholdRule, DeadmanRule) if rule.__name__ not in parts[0]]
    return "\n".join(parts)


# ---- typer app -> command reference ----------------------------------------------------------------------


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    """Yield (words, command) for ``command`` and every command under it, depth first, by name."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, [*path, name])


def _param_type(param: Any) -> str:
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if getattr(param, "is_flag", False):
        return "flag"
    return _type_name(annotation) if annotation is not None else ""


def _arg_usage(param: Any) -> str:
    word = param.name.upper() + ("..." if param.nargs == -1 else "")
    return word if param.required else f"[{word}]"


def cli_reference() -> str:
    """Return every ``daggers`` command (from the typer app's click tree) with its usage, help and parameters."""
    import typer.main

    from job.cli.main import app

    root = typer.main.get_command(app)
    out: list[str] = []
    for words, command in _commands(root, ["daggers"]):
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        args = [p for p in params if not hasattr(p, "is_flag")]
        usage = " ".join(
            [*words, *(["[OPTIONS]"] if len(params) > len(args) else []), *(_arg_usage(p) for p in args)]
        )
        if hasattr(command, "commands"):
            usage += " COMMAND [ARGS]..."
        level = "#" * min(len(words) + 1, 4)
        help_text = _escape(inspect.cleandoc(command.help or ""))
        out += [f"{level} `{' '.join(words)}`", "", f"```\n{usage}\n```", "", help_text, ""]
        if params:
            out += ["| parameter | type | default | help |", "|---|---|---|---|"]
            for p in params:
                names = (
                    ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
                    if hasattr(p, "is_flag")
                    else f"`{p.name.upper()}`"
                )
                default = (
                    "*required*"
                    if p.required
                    else (
                        ""
                        if p.default in (None, (), [])
                        else f"`{str(p.default).lower()}`"
                        if isinstance(p.default, bool)
                        else f"`{p.default}`"
                    )
                )
                out.append(f"| {names} | {_param_type(p)} | {default} | {_cell(p.help or '')} |")
            out.append("")
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "spec": spec_reference,
    "alerts": alerts_reference,
    "cli": cli_reference,
}


def expand(markdown: str) -> str:
    """Return ``markdown`` with every ``<!-- generated: NAME -->`` marker replaced by its generated Markdown (in a
    ``daggers-reference`` block, which docs/stylesheets/extra.css lays out).

    Raises KeyError naming a marker that has no generator.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"unknown generated section {name!r} (known: {', '.join(GENERATORS)})")
        return f'<div class="daggers-reference" markdown>\n\n{GENERATORS[name]()}\n\n</div>'

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: expand the markers of one page."""
    return expand(markdown)


#: A Sphinx cross-reference role in a docstring (``:func:`name```) as mkdocstrings renders it: the role's
#: name as text before the code.
SPHINX_ROLE = re.compile(r":(?:func|meth|class|mod|attr|exc|data|obj|const|ref):(?=<code>)")


def plain_roles(html_text: str) -> str:
    """Return rendered HTML without the Sphinx role names of the docstrings (the name stays, as code)."""
    return SPHINX_ROLE.sub("", html_text)


def on_page_content(html_text: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: a docstring's ``:func:`x``` shows as ``x`` (the Python API page)."""
    return plain_roles(html_text)
