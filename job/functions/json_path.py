"""A small JSONPath for JsonUpdate and JsonDelete: ``$``, ``.key``, ``['key']`` and ``[index]`` steps.

That is the part of Jayway JsonPath (the original platform's library) that names one node. Filters,
wildcards and deep scans (``[?(...)]``, ``*``, ``..``) are rejected with :class:`JsonPathError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

Step = str | int

_STEP = re.compile(
    r"""\.(?P<key>[A-Za-z_$][\w$-]*)|\[\s*(?:'(?P<sq>(?:[^'\\]|\\.)*)'|"(?P<dq>(?:[^"\\]|\\.)*)"|(?P<idx>-?\d+))\s*\]"""
)


class JsonPathError(ValueError):
    """A JSONPath that this module cannot follow."""


def parse_path(path: str) -> tuple[Step, ...]:
    """Return the steps of ``path`` (keys as str, array indexes as int).

    Raises JsonPathError naming the position of the first unsupported part.
    """
    text = path.strip()
    if not text.startswith("$"):
        raise JsonPathError(f"a JSONPath starts with $, found {path!r}")
    steps: list[Step] = []
    pos = 1
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None or text.startswith("..", pos):
            raise JsonPathError(
                f"unsupported JSONPath {path!r} at character {pos + 1}: use $.key, $['key'] "
                "or $.list[0] steps (no wildcards, filters or ..)"
            )
        if match.group("idx") is not None:
            steps.append(int(match.group("idx")))
        else:
            key = match.group("key") or match.group("sq") or match.group("dq") or ""
            steps.append(key.replace("\\'", "'").replace('\\"', '"'))
        pos = match.end()
    return tuple(steps)


def _parent(doc: Any, steps: tuple[Step, ...]) -> Any:
    """Return the container that holds the last step, or raise KeyError/IndexError/TypeError."""
    node = doc
    for step in steps[:-1]:
        if isinstance(step, int):
            if not isinstance(node, list):
                raise TypeError("not a list")
            node = node[step]
        else:
            if not isinstance(node, dict):
                raise TypeError("not an object")
            node = node[step]
    return node


def update(text: str, steps: tuple[Step, ...], value: Any) -> str | None:
    """Return the JSON ``text`` with ``value`` set at ``steps`` (a new key is added), compactly encoded.

    Returns None when the text is not JSON or the path's parent does not exist (or is of the wrong kind);
    an empty path replaces the whole document.
    """
    try:
        doc = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not steps:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        parent = _parent(doc, steps)
        last = steps[-1]
        if isinstance(last, int):
            if not isinstance(parent, list):
                return None
            parent[last] = value
        else:
            if not isinstance(parent, dict):
                return None
            parent[last] = value
    except (KeyError, IndexError, TypeError):
        return None
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def delete(text: str, steps: tuple[Step, ...]) -> str | None:
    """Return the JSON ``text`` without the node at ``steps``, compactly encoded.

    A path that does not exist leaves the document as it is (Jayway's DEFAULT_PATH_LEAF_TO_NULL);
    returns None when the text is not JSON or the path is ``$`` itself.
    """
    try:
        doc = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not steps:
        return None
    try:
        parent = _parent(doc, steps)
        last = steps[-1]
        if isinstance(last, int) and isinstance(parent, list):
            del parent[last]
        elif isinstance(last, str) and isinstance(parent, dict):
            parent.pop(last, None)
    except (KeyError, IndexError, TypeError):
        pass
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
