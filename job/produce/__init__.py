"""Synthetic event streams (driver pings, booking logs, API logs) and a Kafka producer for them.

* :mod:`job.produce.cities`: the cities events happen in (centre, radius, ``city_id``);
* :mod:`job.produce.generator`: :func:`generate` / :func:`generate_chunks` build an :class:`EventBatch`
  (Arrow table + serialized protobuf payloads + Kafka keys), vectorised and deterministic per seed;
* :mod:`job.produce.producer`: :func:`produce`, :func:`ensure_topic`, :func:`corrupt`.

Names are loaded on first use, so importing the generator does not load the Kafka client.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "City": "cities",
    "CITIES": "cities",
    "resolve_cities": "cities",
    "EventBatch": "generator",
    "GenerateError": "generator",
    "Stream": "generator",
    "generate": "generator",
    "generate_chunks": "generator",
    "ProduceError": "producer",
    "ProduceReport": "producer",
    "corrupt": "producer",
    "ensure_topic": "producer",
    "produce": "producer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import ``name`` from its submodule on first access; raise AttributeError for unknown names."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
