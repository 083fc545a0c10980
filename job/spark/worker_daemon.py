"""PySpark's Python worker daemon, with what a dagger's workers import already imported when it forks them.

Spark starts one ``pyspark.daemon`` per application (per executor on a cluster) and forks every Python
worker from it: the Kafka source's readers, the UDFs, the Arrow evaluations. The stock daemon imports
next to nothing, so each worker imported pyspark's worker, pyarrow, pandas, numpy, protobuf,
confluent-kafka and the job's modules itself: ~0.7 core-s at every worker's start, and ~100 MB of
its own per worker. This daemon (``spark.python.daemon.module``, set by
:func:`job.spark.session.build_session`) imports them once and freezes them out of the garbage
collector's reach (``gc.freeze()``, as :mod:`job.spark.worker_heap` does in a worker), then runs the stock
daemon: every worker it forks starts with them imported, sharing their pages with the daemon (copy on
write).

The stock daemon imports the worker module only after it forks, so that nothing imported may have
started a thread the children would lack. What this one imports starts none at import (the Kafka
client's threads start with a client, Arrow's pools on first use); the shared host's fork server
(:mod:`job.shared.forkserver`) forks after the same imports.
"""

from __future__ import annotations

import gc
import importlib
import logging

#: Imported before the daemon forks any worker; one that fails to import is left to the worker.
PRELOAD = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyarrow",
    "pyarrow.compute",
    "pandas",
    "numpy",
    "google.protobuf.message",
    "confluent_kafka",
    "job.sources.kafka",
    "job.sources.rdkafka",  # with numba, which the source's readers compile their loops with
    "job.functions.spark_udfs",
)

log = logging.getLogger(__name__)


def preload() -> list[str]:
    """Import :data:`PRELOAD` and freeze what is alive; return the modules that could not be imported."""
    missing = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the worker imports it itself, and reports its error there
            missing.append(name)
    gc.collect()
    gc.freeze()
    return missing


def main() -> None:
    from pyspark import daemon

    preload()
    daemon.manager()


if __name__ == "__main__":
    main()
