"""Enrichment lookups: the SQL's result rows get columns from PostgreSQL, Elasticsearch or HTTP(S), before the
sinks (the spec's ``lookups``; upstream Dagger's external post-processors).

* :mod:`job.enrich.engine` — a micro-batch's distinct keys, asked in batches with a TTL cache, spread back on
  the rows (:class:`~job.enrich.engine.Enricher`);
* :mod:`job.enrich.sources` — the servers asked (one ``= ANY($1)`` query, one ``_mget``, HTTP calls);
* :mod:`job.enrich.cache` — answers kept ``cache_ttl_s``, a batch of keys at a time;
* :mod:`job.enrich.keys`, :mod:`job.enrich.values` — distinct keys in Arrow; a path's value made a column's type;
* :mod:`job.enrich.replay` — the answers a batch had, kept so a replayed batch writes the same rows.
"""
