"""Which functions Dagger SQL knows: Spark's built-ins plus the Dagger library."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal


@dataclass(frozen=True)
class DaggerFunction:
    """A function of the Dagger library as SQL sees it."""

    name: str
    kind: Literal["scalar", "aggregate", "window", "window_property"]
    signature: str
    doc: str


DAGGER_FUNCTIONS: dict[str, DaggerFunction] = {f.name.lower(): f for f in [
    DaggerFunction("TUMBLE", "window", "TUMBLE(rowtime, INTERVAL 'n' unit)",
                   "GROUP BY item: fixed, non-overlapping windows of the given size."),
    DaggerFunction("HOP", "window", "HOP(rowtime, INTERVAL slide, INTERVAL size)",
                   "GROUP BY item: sliding windows of `size` every `slide` (Flink's order: slide, then size)."),
    DaggerFunction("TUMBLE_START", "window_property", "TUMBLE_START(rowtime, INTERVAL 'n' unit)",
                   "The inclusive start of the row's tumbling window."),
    DaggerFunction("TUMBLE_END", "window_property", "TUMBLE_END(rowtime, INTERVAL 'n' unit)",
                   "The exclusive end of the row's tumbling window."),
    DaggerFunction("HOP_START", "window_property", "HOP_START(rowtime, slide, size)",
                   "The inclusive start of the row's sliding window."),
    DaggerFunction("HOP_END", "window_property", "HOP_END(rowtime, slide, size)",
                   "The exclusive end of the row's sliding window."),
    DaggerFunction("S2Id", "scalar", "S2Id(lat DOUBLE, long DOUBLE, level INT) -> STRING",
                   "The S2 cell containing the point at `level` (0-30), as the decimal string of the "
                   "signed 64-bit cell id (Java long, as the original platform). NULL for a NULL input."),
    DaggerFunction("DistinctCount", "aggregate", "DistinctCount(x) -> INT",
                   "The number of distinct non-NULL values of x in the group."),
]}


@cache
def spark_functions() -> frozenset[str]:
    """Return the lower-cased names of Spark's built-in functions (``SHOW FUNCTIONS`` of the pinned Spark)."""
    text = resources.files("job.sql").joinpath("spark_functions.txt").read_text()
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


def is_known(name: str) -> bool:
    """Return whether ``name`` is a Spark built-in or a Dagger function (case-insensitive)."""
    low = name.lower()
    return low in DAGGER_FUNCTIONS or low in spark_functions()


def dagger_kind(name: str) -> str | None:
    """Return the kind of a Dagger function, or None for anything else."""
    fn = DAGGER_FUNCTIONS.get(name.lower())
    return fn.kind if fn else None
