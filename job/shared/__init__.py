"""Shared Spark applications: many daggers (``isolation: shared``) as isolated streaming queries of one
long-lived application, in the spirit of Flink session clusters.

* :mod:`job.shared.channel` — the files a supervisor and a host talk through (no Spark).
* :mod:`job.shared.hosted` — one dagger in a host: own session, FAIR pool, checkpoint, status.
* :mod:`job.shared.fusion` — which daggers may share one query (``isolation: fused``), and its plan.
* :mod:`job.shared.group` — one generation of a fused group's query in a host.
* :mod:`job.shared.host` — the host process (``python -m job.shared.host DIR --master M``).
"""
