"""Counts in words: "1 cluster", "2 clusters", "1 batch", "3 retries" (for the console's and the CLI's lines)."""

from __future__ import annotations

_VOWELS = "aeiou"


def plural(noun: str) -> str:
    """Return the plural of an English ``noun`` (the last word of it takes the ending): cluster → clusters,
    batch → batches, retry → retries, data centre → data centres."""
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in _VOWELS:
        return noun[:-1] + "ies"
    return noun + "s"


def counted(n: float, noun: str, many: str | None = None, *, fmt: str = "") -> str:
    """Return ``n`` and ``noun`` in the number ``n`` asks for: ``counted(1, "dagger")`` is "1 dagger",
    ``counted(1200, "row", fmt=",")`` is "1,200 rows", ``counted(0, "cluster")`` is "0 clusters".

    ``many`` is the plural when it is not the regular one; ``fmt`` is the format spec of the number."""
    return f"{n:{fmt}} {noun if n == 1 else (many or plural(noun))}"
