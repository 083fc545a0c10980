"""A dagger's own Python functions, from the file named by the spec's ``udf_file``.

The file is a Python module; each function it marks with :func:`dagger_function` becomes callable
from the dagger's SQL under its name::

    from job.functions.user import dagger_function
    import pyarrow.compute as pc

    @dagger_function(returns="double", vectorized=True)
    def FareWithTax(fare):            # vectorized: gets whole pyarrow Arrays, returns one
        return pc.multiply(fare, 1.11)

    @dagger_function(returns="string")
    def Initials(name):               # row by row: gets Python values (slower, simpler)
        return None if name is None else "".join(p[0] for p in name.split())

Vectorized functions run as Spark Arrow UDFs; the others as Arrow-batched Python UDFs, one call per
row. Loading the file runs it: only name files you trust.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from job.errors import SpecError
from job.sql.catalog import DAGGER_FUNCTIONS, DaggerFunction, spark_functions

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__dagger_function__"


@dataclass(frozen=True)
class UserFunction:
    """One function of a dagger's ``udf_file``."""

    name: str
    fn: Callable[..., Any]
    returns: str  # a Spark SQL type, e.g. "double", "array<string>"
    vectorized: bool
    arity: tuple[int, ...]
    doc: str


def dagger_function(returns: str, *, name: str | None = None, vectorized: bool = False) -> Callable[[F], F]:
    """Mark a function of a ``udf_file`` as a SQL function returning the Spark type ``returns``.

    ``name`` defaults to the Python name; ``vectorized`` functions take and return pyarrow Arrays.
    """

    def mark(fn: F) -> F:
        setattr(fn, _MARK, {"returns": returns, "name": name or fn.__name__, "vectorized": vectorized})
        return fn

    return mark


def _arity(fn: Callable[..., Any]) -> tuple[int, ...]:
    params = list(inspect.signature(fn).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return tuple(range(0, 23))
    required = sum(1 for p in params if p.default is p.empty)
    return tuple(range(required, len(params) + 1))


def _pickle_by_value(module: Any) -> None:
    """Ship the module's code to Spark's workers, where it cannot be imported by its name."""
    import importlib

    for name in ("pyspark.cloudpickle", "cloudpickle"):  # PySpark pickles UDFs with its own copy
        try:
            importlib.import_module(name).register_pickle_by_value(module)
        except (ImportError, AttributeError, ValueError):
            continue


def load_user_functions(path: str | Path) -> dict[str, UserFunction]:
    """Import ``path`` and return its marked functions by lower-case name.

    Raises SpecError naming the file (and line) when it is missing, does not import, marks no
    function, or names one like a Spark or Dagger function.
    """
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"udf_file: no file at {file}")
    digest = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    module_name = f"dagger_udfs_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise SpecError(f"udf_file: {file} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        # compiled from the file as it is now: the import system's bytecode cache, keyed by the file's mtime in
        # seconds and its size, gave a file edited in the same second to the same length its old code
        exec(compile(file.read_bytes(), str(file), "exec"), module.__dict__)  # noqa: S102
    except Exception as exc:
        sys.modules.pop(module_name, None)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == file]
        line = (
            f":{frames[-1].lineno}" if frames else (f":{exc.lineno}" if isinstance(exc, SyntaxError) else "")
        )
        raise SpecError(f"udf_file: {file}{line}: {type(exc).__name__}: {exc}") from None
    _pickle_by_value(module)
    found: dict[str, UserFunction] = {}
    for value in vars(module).values():
        mark = getattr(value, _MARK, None)
        if not callable(value) or not isinstance(mark, dict):
            continue
        name = str(mark["name"])
        low = name.lower()
        if low in DAGGER_FUNCTIONS or low in spark_functions():
            raise SpecError(
                f"udf_file: {file}: function {name} has the name of a built-in function; rename it"
            )
        if low in found:
            raise SpecError(f"udf_file: {file}: two functions are named {name}")
        found[low] = UserFunction(
            name=name,
            fn=value,
            returns=str(mark["returns"]),
            vectorized=bool(mark["vectorized"]),
            arity=_arity(value),
            doc=(inspect.getdoc(value) or "").split("\n")[0],
        )
    if not found:
        raise SpecError(f"udf_file: {file} marks no function with @dagger_function(returns=...)")
    return found


def catalog_entries(functions: Mapping[str, UserFunction]) -> dict[str, DaggerFunction]:
    """Return the SQL catalog's view of user functions (for :func:`job.sql.translate`)."""
    return {
        low: DaggerFunction(
            name=f.name,
            kind="scalar",
            signature=f"{f.name}(...) -> {f.returns.upper()}",
            doc=f.doc,
            arity=f.arity,
            impl="udf",
        )
        for low, f in functions.items()
    }
