"""Peer 4: Apache Flink SQL (PyFlink 2.3) over workload (a)'s pings, read from local CSV files.

Runs in the Flink virtualenv (``bench/setup_flink.sh``) and imports nothing from the project. No Flink
Kafka connector jar is reachable here, so Flink reads the events from files that bench/run.py writes
from the same generated events that Daggers reads from the broker.

Two forms of the query (streaming mode, legacy group window as Dagger SQL writes it, a 10 s watermark):

* ``udf``: the level-13 S2 cell (signed decimal id) from a PyFlink Python UDF with s2sphere, as a Python
  team would write it (default settings: the UDF runs in a Python worker process);
* ``builtin``: a key of built-in functions only (``CAST(FLOOR(lat * 100) AS BIGINT)``,
  ``CAST(FLOOR(long * 100) AS BIGINT)``): the engine's ceiling with no Python in the path.

The windows go to a filesystem CSV table under ``--out``. The timings go to ``--timings`` as JSON:
``started`` (process start), ``submitted`` (the INSERT handed to the cluster), ``done`` (the job ended).

Usage::

    .flink-venv/bin/python bench/peers/flink_peer.py --mode udf|builtin --events DIR --out DIR \
        --timings FILE [--parallelism 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

STARTED = time.time()

SOURCE = """CREATE TABLE pings (driver_id STRING, lat DOUBLE, `long` DOUBLE, event_time TIMESTAMP(3),
  rowtime AS event_time, WATERMARK FOR rowtime AS rowtime - INTERVAL '10' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""

SINKS = {
    "udf": "CREATE TABLE cells (tag_s2id STRING, drivers BIGINT, window_timestamp TIMESTAMP(3)) "
    "WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')",
    "builtin": "CREATE TABLE cells (tag_lat_bin BIGINT, tag_long_bin BIGINT, drivers BIGINT, "
    "window_timestamp TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')",
}

QUERIES = {
    "udf": """INSERT INTO cells
SELECT S2Id(lat, `long`) AS tag_s2id, COUNT(DISTINCT driver_id) AS drivers,
  TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM pings
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), S2Id(lat, `long`)""",
    "builtin": """INSERT INTO cells
SELECT CAST(FLOOR(lat * 100) AS BIGINT) AS tag_lat_bin, CAST(FLOOR(`long` * 100) AS BIGINT) AS tag_long_bin,
  COUNT(DISTINCT driver_id) AS drivers, TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM pings
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), CAST(FLOOR(lat * 100) AS BIGINT), CAST(FLOOR(`long` * 100) AS BIGINT)""",
}


def s2_udf() -> object:
    """Return the S2Id(lat, lng) Python UDF: the signed decimal level-13 cell id, with s2sphere."""
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    @udf(result_type=DataTypes.STRING())
    def s2id(lat: float, lng: float) -> str:
        import s2sphere

        cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(13).id()
        return str(cid - (1 << 64) if cid >= 1 << 63 else cid)

    return s2id


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--mode", choices=sorted(QUERIES), required=True)
    ap.add_argument(
        "--events", type=Path, required=True, help="folder of CSV files: driver_id,lat,long,event_time"
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timings", type=Path, required=True)
    ap.add_argument("--parallelism", type=int, default=2)
    args = ap.parse_args(argv)

    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(args.parallelism))
    conf.set("table.local-time-zone", "UTC")
    env.execute_sql(SOURCE.format(path=args.events))
    env.execute_sql(SINKS[args.mode].format(path=args.out))
    if args.mode == "udf":
        env.create_temporary_function("S2Id", s2_udf())
    submitted = time.time()
    env.execute_sql(QUERIES[args.mode]).wait()
    done = time.time()
    args.timings.write_text(json.dumps({"started": STARTED, "submitted": submitted, "done": done}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
