"""Turn a failed Spark query's exception into the DaggerError a person reads, from its structure.

Spark's errors carry a condition (``UNRESOLVED_ROUTINE``, ``STREAM_FAILED``, ``PYTHON_EXCEPTION``...) and
message parameters (PySpark's ``getCondition()`` and ``getMessageParameters()``, the JVM's through py4j), and
a chain of causes. A DaggerError raised in Python code that Spark ran (a UDF or the source on an executor, a
sink in ``foreachBatch``) comes back as Python's own traceback, as a parameter of the condition
(``PYTHON_EXCEPTION``'s ``traceback``, a Python data source's ``msg``) or as py4j's message for a callback;
its final exception names the error's class, which is looked up among the loaded ``job``/``alerting`` modules
and rebuilt with its message and hint.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from job.errors import DaggerError

#: How far down a chain of causes to look.
MAX_DEPTH = 8
_TRACEBACK_HEAD = "Traceback (most recent call last):"
_HINT = "  hint: "
_OUR_PACKAGES = ("job.", "alerting.")


def explain_failure(exc: BaseException, raised: BaseException | None = None) -> DaggerError:
    """Return the DaggerError behind a failed query: ``exc`` itself if it is one, else ``raised`` (the error
    the job's own ``foreachBatch`` code kept) if it is one, else the one a Python traceback in ``exc``'s
    chain names, else Spark's own condition and message (one line, without a position in the generated
    Spark SQL)."""
    if isinstance(exc, DaggerError):
        return exc
    if isinstance(raised, DaggerError):
        return raised
    if _jvm_gone(exc):
        return DaggerError(
            "the Spark JVM under this dagger is gone (killed or crashed): the query stopped",
            hint="the run goes on from its checkpoint when started again; a JVM killed for memory: "
            "see the kernel's log (dmesg) and the dagger's resources",
        )
    chain = list(causes(exc))
    python_error = None
    for link in chain:
        for text in python_tracebacks(link):
            final = final_exception(text)
            if final is None:
                continue
            found = error_in_traceback(text)
            if found is not None:
                return found
            python_error = python_error or f"{final[0]}{raised_at(text)}"
    if (
        python_error is not None
    ):  # Python code Spark ran raised something else (a bug): its last line, and where
        return DaggerError(f"the streaming query failed: {python_error[:500]}")
    innermost = next(
        (link for link in reversed(chain) if condition_of(link) not in (None, "STREAM_FAILED")), chain[-1]
    )
    return DaggerError(f"the streaming query failed: {one_line(innermost)[:500]}")


def _jvm_gone(exc: BaseException) -> bool:
    """Whether ``exc`` says the driver lost its JVM: py4j's network error, or a refused connection to it."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(exc, Py4JNetworkError | ConnectionRefusedError | ConnectionResetError | BrokenPipeError)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """Yield ``exc`` and its causes: PySpark's converted cause (a CapturedException's ``_cause``) or Python's
    ``__cause__``, else the JVM exception's ``getCause()`` converted by PySpark."""
    link: BaseException | None = exc
    for _ in range(MAX_DEPTH):
        if link is None:
            return
        yield link
        nxt = getattr(link, "_cause", None) or link.__cause__
        if nxt is None:
            nxt = _java_cause(link)
        link = nxt if isinstance(nxt, BaseException) else None


def _java_cause(exc: BaseException) -> BaseException | None:
    origin = getattr(exc, "_origin", None)
    if origin is None:
        return None
    try:
        from pyspark.errors.exceptions.captured import convert_exception

        cause = origin.getCause()
        return convert_exception(cause) if cause is not None else None
    except Exception:  # a JVM gone or a class py4j cannot reflect: no further cause
        return None


def condition_of(exc: BaseException) -> str | None:
    """Return a Spark error's condition (``UNRESOLVED_ROUTINE``), or None for other exceptions."""
    get = getattr(exc, "getCondition", None)
    if get is None:
        return None
    try:
        condition = get()
    except Exception:
        return None
    return condition if isinstance(condition, str) else None


def parameters_of(exc: BaseException) -> dict[str, Any]:
    """Return a Spark error's message parameters ({} for other exceptions)."""
    get = getattr(exc, "getMessageParameters", None)
    if get is None:
        return {}
    try:
        return dict(get() or {})
    except Exception:
        return {}


def python_tracebacks(exc: BaseException) -> Iterator[str]:
    """Yield the Python tracebacks ``exc`` carries: in its message parameters (a worker's exception, a Python
    data source's error) or, for py4j's error from a Python callback (``foreachBatch``), as its message."""
    for value in parameters_of(exc).values():
        if isinstance(value, str) and _TRACEBACK_HEAD in value:
            yield value
    if condition_of(exc) is None and type(exc).__module__.startswith("pyspark.errors"):
        text = str(exc)
        if _TRACEBACK_HEAD in text:
            yield text


def final_exception(text: str) -> tuple[str, list[str]] | None:
    """Return the line that names the exception a Python traceback ends with (``module.Class: message``) and
    the lines after it, or None when ``text`` holds no traceback."""
    if _TRACEBACK_HEAD not in text:
        return None
    lines = text[text.rindex(_TRACEBACK_HEAD) :].splitlines()[1:]
    # The final exception is the first line at column 0 after the last frame (frames and source lines are
    # indented); its message may go on over more lines: a DaggerError's indented "  hint: ...", a Spark error's
    # "== SQL (line 1, position 22) ==" and the generated SQL at column 0.
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    after = frames[-1] + 1 if frames else 0
    starts = [i for i, line in enumerate(lines) if i >= after and line and not line[0].isspace()]
    if not starts:
        return None
    head, *rest = lines[starts[0] :]
    return head, rest


_FRAME_RE = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)$')


def raised_at(text: str) -> str:
    """`` (in <file> line <n>, <function>)`` of the last frame of the last Python traceback in ``text`` (where a
    user's function raised: a udf_file's), or "" when it names none."""
    if _TRACEBACK_HEAD not in text:
        return ""
    frames = [_FRAME_RE.match(line) for line in text[text.rindex(_TRACEBACK_HEAD) :].splitlines()]
    found = [m for m in frames if m is not None]
    if not found:
        return ""
    last = found[-1]
    return f" (in {PurePath(last['path']).name} line {last['line']}, {last['func']})"


def error_in_traceback(text: str) -> DaggerError | None:
    """Return the DaggerError that a Python traceback ends with (its class found among the loaded ``job`` and
    ``alerting`` modules, its message and hint), or None when it ends with another exception."""
    final = final_exception(text)
    if final is None:
        return None
    head, rest = final
    qualified, sep, message = head.partition(": ")
    module, _, name = qualified.rpartition(".")
    cls = _dagger_error_class(module, name) if sep else None
    if cls is None:
        return None
    hint_lines = [line for line in rest if line.startswith(_HINT)]
    hint = hint_lines[0][len(_HINT) :].strip() if hint_lines else None
    return rebuild(cls, message.strip(), hint)


def _dagger_error_class(module: str, name: str) -> type[DaggerError] | None:
    if not module.startswith(_OUR_PACKAGES) and module not in ("job", "alerting"):
        return None
    cls = getattr(sys.modules.get(module), name, None)
    return cls if isinstance(cls, type) and issubclass(cls, DaggerError) else None


def rebuild(cls: type[DaggerError], message: str, hint: str | None) -> DaggerError:
    """Return a ``cls`` error with ``message`` and ``hint``; a class whose constructor wants more (a bad
    record's topic and offset) is rebuilt as its nearest parent that takes a message, with its title."""
    base = next(
        k
        for k in cls.__mro__
        if k is DaggerError or (issubclass(k, DaggerError) and "__init__" not in vars(k))
    )
    err = base(message, hint=hint)
    err.title = cls.title
    return err


def one_line(exc: BaseException) -> str:
    """Return a Spark error as one line: ``[CONDITION] message`` as Spark words it from the condition and its
    parameters (no position in the generated Spark SQL), else the first line of the exception's text."""
    condition = condition_of(exc)
    get = getattr(exc, "getMessage", None)
    if condition is not None and get is not None:
        try:
            text = str(get())
        except Exception:
            text = str(exc)
    else:
        text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first
