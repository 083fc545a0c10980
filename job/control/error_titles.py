"""The titles of every error Daggers raises, read from the package's source rather than from the classes a
process happens to have imported: a dagger's log names its error by title (``Title: message``, see
:meth:`job.errors.DaggerError.state_text`) and the controller, which never imports the Kafka source or a sink,
must know every title to tell a named error from a stray line."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from job.errors import DaggerError

_PACKAGE = Path(__file__).resolve().parents[1]  # job/


def _base_names(node: ast.ClassDef) -> set[str]:
    names: set[str] = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def _title(node: ast.ClassDef) -> str | None:
    for stmt in node.body:
        targets: list[ast.expr]
        value: ast.expr | None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            targets, value = [stmt.target], stmt.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == "title" for t in targets)
        if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return None


def _classes(package: Path) -> list[ast.ClassDef]:
    found: list[ast.ClassDef] = []
    for path in sorted(package.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        found.extend(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    return found


@functools.cache
def source_titles(package: Path = _PACKAGE) -> frozenset[str]:
    """The titles of the :class:`DaggerError` subclasses defined anywhere under ``package`` (by class name:
    a class whose base is ``DaggerError`` or one of its subclasses, to a fixed point)."""
    classes = _classes(package)
    family = {"DaggerError"}
    grew = True
    while grew:
        grew = False
        for node in classes:
            if node.name not in family and _base_names(node) & family:
                family.add(node.name)
                grew = True
    return frozenset(t for n in classes if n.name in family and (t := _title(n)))


def error_titles() -> frozenset[str]:
    """Every error title: those in the package's source, and those of any subclass loaded from elsewhere."""
    titles: set[str] = set(source_titles())
    stack: list[type] = [DaggerError]
    while stack:
        cls = stack.pop()
        titles.add(str(getattr(cls, "title", "")))
        stack.extend(cls.__subclasses__())
    return frozenset(t for t in titles if t)
