"""Peer 2: a straightforward PySpark Structured Streaming job with a per-row Python UDF.

What a PySpark user writes without Daggers' vectorised functions: the same Kafka source
(``job.sources.kafka``, since this Spark has no Kafka connector), a plain ``@udf`` calling s2sphere
for every row, ``withWatermark`` + ``groupBy(window, s2id)`` + ``size(collect_set(driver_id))``,
append mode, ``foreachBatch`` writing line protocol to InfluxDB.

Usage::

    python bench/peers/spark_udf_peer.py --spec SPEC.yaml --measurement M --progress FILE \
        [--checkpoint DIR] [--master local[2]] [--max-seconds S]

Runs until SIGTERM (or ``--max-seconds``), writing the progress file after every micro-batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from progress import ProgressFile  # noqa: E402


def s2id_plain(lat: float, lng: float) -> str:
    """Return the signed decimal level-13 S2 cell id of one point, with s2sphere (runs once per row)."""
    import s2sphere

    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(13).id()
    return str(cid - (1 << 64) if cid >= 1 << 63 else cid)


NEEDED = ("lat", "long", "driver_id", "event_timestamp")


def plain_source(cfg: Any) -> Any:
    """The source's options with the plain decoded columns: Daggers' plan has the source compute the S2
    cell itself (a derived column), hide lat/long and aggregate first, which is what this peer does the PySpark
    way."""
    return dataclasses.replace(cfg, derived=None, hidden=None, batch_order="", partial=None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--measurement", required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--checkpoint", default=None, help="the query's checkpoint (default: next to --progress)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-seconds", type=float, default=600.0)
    args = ap.parse_args()

    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    from job.query.plan import plan
    from job.sinks.influx import InfluxSink
    from job.sources.kafka import SOURCE_NAME, register_source, source_options
    from job.spark.session import build_session
    from job.spec import load_spec

    spec = load_spec(args.spec)
    p = plan(spec, Path(args.spec).parent)
    sink_spec = spec.sinks[0].model_copy(update={"measurement": args.measurement})
    sink = InfluxSink(sink_spec)
    sink.open()
    spark = build_session("bench-spark-udf-peer", master=args.master, shuffle_partitions=spec.parallelism)
    register_source(spark)
    s2id = udf(s2id_plain, "string")

    source = plain_source(p.streams[0].source)
    missing = set(NEEDED) - set(source.output_columns())
    if missing:
        print(f"spark-udf peer: the source does not hand over {sorted(missing)}", file=sys.stderr)
        return 2
    df = (
        spark.readStream.format(SOURCE_NAME)
        .options(**source_options(source))
        .load()
        .withColumn("rowtime", F.col("event_timestamp"))
        .withWatermark("rowtime", f"{spec.watermark_delay_ms} milliseconds")
    )
    result = (
        df.groupBy(F.window("rowtime", "60 seconds"), s2id("lat", "long").alias("tag_s2id"))
        .agg(F.size(F.collect_set("driver_id")).alias("drivers"))
        .select("tag_s2id", "drivers", F.col("window.end").alias("window_timestamp"))
    )

    progress = ProgressFile(args.progress)
    written = [0]

    def write(batch, batch_id: int) -> None:  # noqa: ANN001 - a Spark DataFrame
        written[0] += sink.write(batch.toArrow(), batch_id)

    query = (
        result.writeStream.outputMode("append")
        .foreachBatch(write)
        .option(
            "checkpointLocation", args.checkpoint or str(Path(args.progress).parent / "spark-udf-checkpoint")
        )
        .trigger(processingTime="0 seconds")
        .start()
    )
    stopping = [False]
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__(0, True))
    deadline = time.monotonic() + args.max_seconds
    seen: set[int] = set()
    first_start: float | None = None
    while query.isActive and not stopping[0] and time.monotonic() < deadline:
        query.awaitTermination(0.5)
        new_rows, new_batch = 0, False
        for prog in query.recentProgress:
            data = json.loads(prog.json)
            if data["batchId"] in seen:
                continue
            seen.add(data["batchId"])
            new_batch = True
            rows = int(data.get("numInputRows") or 0)
            if rows and first_start is None:
                took = (data.get("durationMs") or {}).get("triggerExecution", 0) / 1000
                first_start = time.time() - took
            new_rows += rows
        if new_batch:  # updated_at is then the end of the last finished batch (within 0.5 s)
            progress.events += new_rows
            progress.first_event_at = first_start
            progress.points = written[0]
            progress.flush()
    failed = query.exception() is not None
    if failed:
        print(f"spark-udf peer failed: {str(query.exception())[:2000]}", file=sys.stderr)
    query.stop()
    progress.flush(done=True)
    sink.close()
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
