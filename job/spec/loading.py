"""Loading a spec: ${VAR} interpolation, YAML parsing and errors naming each bad field's line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from job.errors import SpecError
from job.spec.base import REFERENCE_RE
from job.spec.dagger import DaggerSpec
from job.spec.lookups import LOOKUP_TYPES
from job.spec.numbers import number_problem
from job.spec.sinks import SINK_TYPES
from job.spec.transformers import TRANSFORMER_TYPES
from job.spec.wording import field_at, models_at, unknown_field, written_as


def _child(node: yaml.Node | None, key: Any) -> yaml.Node | None:
    """Return the child of a YAML mapping (by key; ``sinks`` found as a single ``sink:`` too) or sequence (by
    index) at ``key``, or None."""
    if isinstance(node, yaml.MappingNode):
        nxt = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        if nxt is None and key == "sinks":
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == "sink"), None)
        return nxt
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Return the 1-based line of the YAML node at ``loc`` (the deepest one that exists)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        nxt = _child(node, key)
        if nxt is not None:
            node = nxt
            line = node.start_mark.line + 1
    return line


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key in (
            *SINK_TYPES,
            *LOOKUP_TYPES,
            "function-after[_target()]",
            "function-after[_format()]",
            "function-after[_request()]",
        ):
            continue
        else:
            out += ("." if out else "") + str(key)
    return out or "(spec)"


def _node_at(node: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """Return the YAML node at ``loc`` exactly (a single ``sink:`` standing for ``sinks[0]``), or None."""
    for key in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(key, int):
            continue  # sink: {...} read as sinks[0]
        node = _child(node, key)
        if node is None:
            return None
    return node


def format_validation(
    err: ValidationError,
    node: yaml.Node | None = None,
    source: str = "spec",
    variables: dict[int, list[str]] | None = None,
    root: type[BaseModel] = DaggerSpec,
) -> str:
    """Return one line per problem: ``source:LINE: field.path: message``.

    An unknown field gets "did you mean …?" (a field of ``root``, the model validated); a bad number names
    the value given and what the field allows (:mod:`job.spec.numbers`); a problem on a line whose value came
    from ``${VAR}`` names the variable (``variables``: line -> the variables substituted on it).
    """
    lines: list[str] = []
    for e in err.errors():
        loc = tuple(k for k in e["loc"] if k not in SINK_TYPES + TRANSFORMER_TYPES + LOOKUP_TYPES)
        line = _line_of(node, loc) if node is not None else None
        where = f"{source}:{line}" if line else source
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and e["loc"]:
            msg = unknown_field(str(e["loc"][-1]), _fields_at(e["loc"], root))
        number = number_problem(e, field_at(e["loc"], root), written_as(_node_at(node, loc)))
        if number is not None:
            msg = number
        if line and variables and line in variables:
            msg += f" (the value comes from {', '.join('${' + v + '}' for v in variables[line])})"
        problem = f"{where}: {_path(loc)}: {msg}"
        if problem not in lines:  # a union's members each report the same bad number
            lines.append(problem)
    return "\n".join(lines)


def _fields_at(loc: tuple[Any, ...], root: type[BaseModel] = DaggerSpec) -> set[str]:
    """The field names the models at ``loc`` (an error's location, its last key the bad field) accept."""
    models = models_at(loc[:-1], root)
    names = {name for m in models for name in m.model_fields}
    return names | ({"sink"} if DaggerSpec in models else set())


def interpolate_env(
    text: str,
    env: Mapping[str, str] | None = None,
    source: str = "spec",
    variables: dict[int, list[str]] | None = None,
    values: dict[str, str] | None = None,
    *,
    keep_unset: bool = False,
) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}`` with environment values (secrets stay out of files).

    As in the shell, ``${VAR:-default}`` gives the default when VAR is unset or empty. ``variables``, when
    given, gets line -> the names substituted on it (so errors about a value can name its variable), and
    ``values`` name -> the text put in.
    With ``keep_unset`` a variable that ``env`` does not set stays a ``${NAME}`` (or ``${NAME:-default}``)
    reference, for the host the dagger runs on to resolve (a spec checked as data, :mod:`job.control.spec_check`).
    Raises SpecError naming the line of a variable that is unset and has no default.
    """
    import os

    env_values = os.environ if env is None else env
    out = []
    for lineno, line in enumerate(text.splitlines(keepends=True), start=1):

        def sub(m: re.Match[str], lineno: int = lineno) -> str:
            name, default = m.group(1), m.group(2)
            if variables is not None:
                variables.setdefault(lineno, []).append(name)
            value = env_values.get(name)
            if keep_unset and value is None:
                return m.group(0)
            if default is not None and not value:
                value = default
            if value is not None:
                if values is not None:
                    values[name] = value
                return value
            raise SpecError(
                f"{source}:{lineno}: environment variable {name} is not set (and has no :-default)",
                hint=f"export {name}=…, or write ${{{name}:-default}} in the spec",
            )

        out.append(REFERENCE_RE.sub(sub, line))
    return "".join(out)


def parse_spec(
    text: str, source: str = "spec", env: Mapping[str, str] | None = None, *, keep_unset: bool = False
) -> DaggerSpec:
    """Parse and validate YAML text; raise SpecError naming each bad field and its line.

    ``${VAR}`` and ``${VAR:-default}`` are replaced from ``env`` (default: the process environment); with
    ``keep_unset``, those ``env`` does not set stay references (see :func:`interpolate_env`). The YAML is
    read within :mod:`job.check.yaml_load`'s limits (size, depth, no aliases).
    """
    from job.check.yaml_load import YamlError, compose_yaml, construct

    variables: dict[int, list[str]] = {}
    substituted: dict[str, str] = {}
    text = interpolate_env(text, env, source, variables, substituted, keep_unset=keep_unset)
    try:
        node = compose_yaml(text, source)
        data = construct(node, source)
    except YamlError as exc:
        names = variables.get(exc.line) if exc.line else None
        if names:
            exc.message += f" (the value comes from {', '.join('${' + v + '}' for v in names)})"
        raise
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a dagger spec is a YAML mapping (name, streams, sql, sink)")
    try:
        spec = DaggerSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation(exc, node, source, variables)) from None
    spec._substituted = substituted
    return spec


def load_spec(path: str | Path) -> DaggerSpec:
    """Read and validate a spec file; raise SpecError (file missing, bad YAML, bad fields)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"no spec file at {p}")
    spec = parse_spec(p.read_text(), source=str(p))
    if spec.udf_file and not Path(spec.udf_file).is_absolute():
        spec = spec.model_copy(update={"udf_file": str(p.parent / spec.udf_file)})
    for key in ("dart_store", "schema_dir"):
        value = getattr(spec, key)
        if value and "://" not in value and not Path(value).is_absolute():
            spec = spec.model_copy(update={key: str(p.parent / value)})
    return spec
