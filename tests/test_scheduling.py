"""The modules that share the session's standalone Spark cluster are exactly conftest's one-worker group."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SAME_WORKER

ROOT = Path(__file__).resolve().parents[1]


def _takes(path: Path, fixture: str) -> bool:
    """Whether a test function (or fixture) in ``path`` takes ``fixture`` as an argument."""
    tree = ast.parse(path.read_text(), str(path))
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(arg.arg == fixture for arg in node.args.args)
        for node in ast.walk(tree)
    )


def test_every_module_that_takes_the_cluster_is_in_its_group() -> None:
    users = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if _takes(path, "spark_cluster")
    )
    assert users == sorted(SAME_WORKER["spark_cluster"])
