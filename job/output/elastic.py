"""Read a dagger's output back from its Elasticsearch sink: a date histogram of window_timestamp with
the sum of one field per step, over every index the sink's pattern may give."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from job.common.index_pattern import search_pattern
from job.common.optional import require
from job.output.model import OutputError
from job.spec import ElasticsearchSinkSpec

TIME_COLUMN = "window_timestamp"
_NUMERIC = {
    "long",
    "integer",
    "short",
    "byte",
    "double",
    "float",
    "half_float",
    "scaled_float",
    "unsigned_long",
}


class ElasticsearchOutput:
    """Sums of one field per step from the sink's indices."""

    def __init__(self, spec: ElasticsearchSinkSpec) -> None:
        elasticsearch = require("elasticsearch", "elasticsearch", needed_by="reading an elasticsearch sink")
        self.spec = spec
        self.index = search_pattern(spec.index)
        kwargs: dict[str, Any] = {"request_timeout": spec.timeout_s, "max_retries": 1}
        if spec.api_key is not None:
            kwargs["api_key"] = spec.api_key.get_secret_value()
        elif spec.username is not None and spec.password is not None:
            kwargs["basic_auth"] = (spec.username, spec.password.get_secret_value())
        if any(h.startswith("https://") for h in spec.hosts):
            kwargs["verify_certs"] = spec.verify_certs
            if spec.ca_certs:
                kwargs["ca_certs"] = spec.ca_certs
        self._es = elasticsearch
        self.client = elasticsearch.Elasticsearch(list(spec.hosts), **kwargs)

    def describe(self) -> str:
        """Return what the documents are read from, for people (without the server)."""
        return f"index {self.index}"

    def server(self) -> str:
        """Return the servers the documents are read from."""
        return ", ".join(self.spec.hosts)

    def _call(self, fn: Any) -> Any:
        import elastic_transport

        try:
            return fn()
        except elastic_transport.TransportError as exc:
            raise OutputError(
                f"Elasticsearch at {', '.join(self.spec.hosts)} is unreachable: {type(exc).__name__}"
            ) from None
        except self._es.ApiError as exc:
            raise OutputError(
                f"Elasticsearch refused reading {self.index} (HTTP {exc.meta.status})"
            ) from None

    def fields(self) -> list[str]:
        """Return the numeric fields mapped in the sink's indices, sorted."""
        mappings = self._call(
            lambda: self.client.indices.get_mapping(
                index=self.index, allow_no_indices=True, ignore_unavailable=True
            )
        )
        names = {
            name
            for m in dict(mappings).values()
            for name, prop in (m.get("mappings", {}).get("properties") or {}).items()
            if prop.get("type") in _NUMERIC and not name.startswith(("tag_", "label_"))
        }
        return sorted(names)

    def read(
        self, field: str, start: datetime, end: datetime, step_s: int, tag: tuple[str, str] | None
    ) -> list[tuple[datetime, float]]:
        """Return (step start, sum of ``field``) for each step of (start, end] that has documents, oldest first.

        Raises OutputError: the server is down or refuses, or no index maps such a numeric field."""
        known = self.fields()
        if known and field not in known:
            raise OutputError(
                f"index {self.index} has no numeric field {field!r}",
                hint=f"choose one of: {', '.join(known)}",
            )
        filters: list[dict[str, Any]] = [
            {
                "range": {
                    TIME_COLUMN: {
                        "gt": int(start.timestamp() * 1000),
                        "lte": int(end.timestamp() * 1000),
                        "format": "epoch_millis",
                    }
                }
            }
        ]
        if tag is not None:
            filters.append({"term": {tag[0]: tag[1]}})
        body = self._call(
            lambda: self.client.search(
                index=self.index,
                size=0,
                allow_no_indices=True,
                ignore_unavailable=True,
                query={"bool": {"filter": filters}},
                aggs={
                    "t": {
                        "date_histogram": {
                            "field": TIME_COLUMN,
                            "fixed_interval": f"{step_s}s",
                            "min_doc_count": 1,
                        },
                        "aggs": {"v": {"sum": {"field": field}}},
                    }
                },
            )
        )
        buckets = ((body.get("aggregations") or {}).get("t") or {}).get("buckets") or []
        return [
            (datetime.fromtimestamp(b["key"] / 1000, UTC), float(b["v"]["value"]))
            for b in buckets
            if b.get("doc_count")
        ]
