"""YAML for untrusted text: bounded in size, depth and nodes, with no aliases.

A spec or any other YAML a client sends is read with :func:`load_yaml`. PyYAML's own loaders expand
aliases (``*name``) into shared objects, so a few hundred bytes of nested aliases (a "billion laughs")
cost minutes of CPU in whatever walks the result; and its composer recurses once per nesting level. A
spec needs neither: aliases are refused, and nesting, node count and size are capped well above what
any real spec uses.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent

from job.errors import SpecError

#: The largest YAML text accepted (bytes of UTF-8). The largest example spec is under 8 KiB.
MAX_BYTES = 256 * 1024
#: The deepest nesting of mappings and lists (a spec nests about 6 deep).
MAX_DEPTH = 32
#: The most nodes (scalars, mappings, lists) in one document.
MAX_NODES = 20_000


#: The only YAML types a spec holds (``!!binary``, ``!!set``, ``!!python/…`` and local tags are refused: a
#: ``!!binary`` password would pass a check of strings and reach the model as bytes).
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
)


#: Control characters a value may not hold (tab, newline and carriage return are text).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


class YamlError(SpecError):
    """YAML text that cannot be read, or goes past a limit; ``line`` is 1-based (None: not known)."""

    def __init__(self, message: str, *, line: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.line = line


class _Limit(yaml.YAMLError):
    """Raised inside the composer when the text goes past a limit (turned into a SpecError)."""

    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.message, self.mark = message, mark


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that refuses aliases and counts depth and nodes as it composes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _Limit("YAML aliases (*name) are not accepted: write the value out", event.start_mark)
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise _Limit(f"more than {MAX_NODES:,} YAML values", event.start_mark)
        nested = isinstance(event, CollectionStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Limit(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1
        if node is not None and node.tag not in _PLAIN_TAGS:
            raise _Limit(
                f"the YAML tag {node.tag.removeprefix('tag:yaml.org,2002:')!r} is not accepted: a spec holds "
                "only text, numbers, booleans, lists and mappings",
                node.start_mark,
            )
        if isinstance(node, yaml.ScalarNode) and _CONTROL_RE.search(node.value):
            raise _Limit(
                "a control character (such as \\0 or \\x1b) is not accepted in a value", node.start_mark
            )
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise _Limit(
                            f"the key {key.value[:100]!r} is given twice in one mapping", key.start_mark
                        )
                    seen.add(key.value)
        return node


def _line(mark: yaml.Mark | None) -> int | None:
    return mark.line + 1 if mark is not None else None


def _where(source: str, mark: yaml.Mark | None) -> str:
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source


def compose_yaml(text: str, source: str = "spec") -> yaml.Node | None:
    """Return the node tree of ``text`` (for line numbers), within the limits.

    Raises SpecError naming ``source``, the line and the column: too large, nested too deep, too many
    values, an alias, or not valid YAML.
    """
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlError(
            f"{source}: the YAML text is larger than {MAX_BYTES // 1024} KiB",
            hint="a spec is a few KiB: look for pasted data",
        )
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses control characters (NUL, ESC) here
        return loader.get_single_node()
    except _Limit as exc:
        raise YamlError(f"{_where(source, exc.mark)}: {exc.message}", line=_line(exc.mark)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlError(f"{_where(source, mark)}: not valid YAML: {problem}", line=_line(mark)) from None
    finally:
        if loader is not None:
            loader.dispose()


def construct(node: yaml.Node | None, source: str = "spec") -> Any:
    """Return the Python value (safe types only) of a node tree from :func:`compose_yaml`.

    Raises YamlError (a value of an unknown tag, a bad timestamp).
    """
    if node is None:
        return None
    loader = _BoundedLoader("")
    try:
        return loader.construct_document(node)
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise YamlError(f"{source}: not valid YAML: {str(exc).splitlines()[0][:200]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlError(
            f"{_where(source, mark)}: not valid YAML: {getattr(exc, 'problem', exc)}", line=_line(mark)
        ) from None
    finally:
        loader.dispose()


def load_yaml(text: str, source: str = "spec") -> Any:
    """Return the Python value of ``text`` (safe types only), within the limits.

    Raises YamlError (a SpecError) naming the source, line and column: too large, nested too deep, too
    many values, an alias, or not valid YAML.
    """
    return construct(compose_yaml(text, source), source)
