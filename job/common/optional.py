"""The optional dependencies: each extra's packages are imported through :func:`require`, so a missing one is a
:class:`MissingDependencyError` (title, message, hint) that the CLI, the console and the server show as one
line, never a ``ModuleNotFoundError`` traceback.

Daggers is installed from a checkout or from a wheel built from one; the hint says how to add an extra both
ways (no package index holds it).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from job.errors import DaggerError

#: The extras of ``pyproject.toml`` that :func:`require` names.
EXTRAS = frozenset(
    {"brokers", "influx2", "postgres", "elasticsearch", "enrich", "tui", "atlas", "server", "alerting"}
)


class MissingDependencyError(DaggerError):
    """An optional package that a command, sink or lookup needs is not installed."""

    title = "Missing package"

    def __init__(
        self, module: str, extra: str, *, needed_by: str | None = None, detail: str | None = None
    ) -> None:
        self.package = package_name(module)
        self.extra = extra
        who = needed_by or "this"
        message = f"{who} needs the {self.package} package, from Daggers' {extra} extra"
        super().__init__(message + (f" ({detail})" if detail else ""), hint=install_hint(extra))
        self.title = f"{self.package} is not installed"


def package_name(module: str) -> str:
    """Return the distribution name people install for ``module`` (``influxdb_client`` -> ``influxdb-client``)."""
    return module.partition(".")[0].replace("_", "-")


def install_hint(extra: str) -> str:
    """Return how to add ``extra`` to an install from a checkout or from a built wheel."""
    return (
        f"install the {extra} extra: pip install '.[{extra}]' in a Daggers checkout, "
        f"or pip install 'daggers-<version>-py3-none-any.whl[{extra}]' from a built wheel"
    )


def require(module: str, extra: str, *, needed_by: str | None = None) -> ModuleType:
    """Import and return ``module``, a package of the optional ``extra``.

    Raises:
        MissingDependencyError: ``module`` (or a package it imports) is not installed; ``needed_by`` names
            what needs it in the message ("the postgres sink").
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.partition(".")[0]
        missing = (exc.name or "").partition(".")[0]
        detail = f"it cannot import {exc.name}" if missing and missing != top else None
        raise MissingDependencyError(module, extra, needed_by=needed_by, detail=detail) from exc


def require_installed(module: str, extra: str, *, needed_by: str | None = None) -> None:
    """Check that ``module`` of ``extra`` is installed without importing it (for a command that runs it in a
    child process, such as Streamlit).

    Raises:
        MissingDependencyError: it is not installed.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    if importlib.util.find_spec(module.partition(".")[0]) is None:
        raise MissingDependencyError(module, extra, needed_by=needed_by)
