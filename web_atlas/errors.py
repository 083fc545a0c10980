"""The errors the Atlas shows to a person (a title, a message naming what to fix, maybe a hint)."""

from __future__ import annotations

from job.errors import DaggerError


class AtlasError(DaggerError):
    """The Atlas cannot show a map: bad settings, unreachable InfluxDB, a query InfluxDB refuses."""

    title = "Atlas error"


__all__ = ["AtlasError"]
