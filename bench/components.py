"""Each stage of workload (a) alone, to know where the limit is.

1. Kafka fetch: confluent-kafka consume of the whole topic (assign + seek, 10,000 at a time);
2. protobuf decode to Arrow: ``job.schema.arrow.ArrowDecoder.decode`` of the fetched payloads;
3. S2Id: ``job.functions.s2.latlng_to_cell_id`` alone, and the ``S2Id`` Arrow UDF body
   (``job.functions.spark_udfs.s2id_arrow``: ids + signed decimal strings);
4. the Spark aggregation over in-memory Arrow data: the dagger's translated SQL as a batch query over
   ``spark.createDataFrame(arrow table)`` (warm: best of 2); the S2 cell column is added to the table
   first, as the Kafka source adds it (``job.sql.pushdown``);
5. the InfluxDB write: ``job.sinks.influx.InfluxSink.write`` of the aggregation's result.

Each stage runs on one thread of this process (Spark: ``local[cores]``), one after the other.

Usage::

    python bench/components.py --bootstrap H:P --topic T --influx URL --db DB --out FILE.json [--cores 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition  # noqa: E402

from bench.procstats import tree  # noqa: E402
from bench.workloads import DRIVERS_SQL, PING_CLASS, S2_LEVEL  # noqa: E402


def fetch(bootstrap: str, topic: str) -> tuple[list[bytes], float, int]:
    """Consume every record of ``topic``; return (payloads, seconds, bytes)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-components",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "queued.max.messages.kbytes": 262144,
        }
    )
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
    payloads: list[bytes] = []
    size = 0
    eof: set[int] = set()
    started = time.perf_counter()
    while len(eof) < len(parts):
        for msg in consumer.consume(10_000, timeout=1.0):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise RuntimeError(err.str())
            value = msg.value()
            payloads.append(value)
            size += len(value)
    elapsed = time.perf_counter() - started
    consumer.close()
    return payloads, elapsed, size


def _tree_cpu() -> float:
    """CPU seconds used so far by this process and its children (the Spark JVM and Python workers)."""
    return sum(p.cpu_s for p in tree(os.getpid()))


def _best(fn, repeat: int = 3) -> tuple[float, object, float]:  # noqa: ANN001 - any callable
    """Run ``fn`` ``repeat`` times; return (best wall seconds, its result, CPU seconds of that run)."""
    best, out, cpu = float("inf"), None, 0.0
    for _ in range(repeat):
        c, t = _tree_cpu(), time.perf_counter()
        out = fn()
        took, used = time.perf_counter() - t, _tree_cpu() - c
        if took < best:
            best, cpu = took, used
    return best, out, cpu


def _stage(rows: int, seconds: float, cpu_s: float, **extra: float) -> dict[str, float]:
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "cpu_s": cpu_s,
        "cpu_us_per_row": cpu_s / rows * 1e6 if rows else 0.0,
        **extra,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--influx", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--max-rows", type=int, default=1_000_000, help="rows used by stages 2-5")
    args = ap.parse_args()

    from job.functions import s2
    from job.functions.spark_udfs import s2cell_arrow, s2id_arrow
    from job.schema import default_registry
    from job.schema.arrow import ArrowDecoder

    results: dict[str, dict[str, float]] = {}
    cpu = _tree_cpu()
    payloads, secs, size = fetch(args.bootstrap, args.topic)
    results["kafka fetch"] = _stage(len(payloads), secs, _tree_cpu() - cpu, mb_per_s=size / secs / 1e6)
    payloads = payloads[: args.max_rows]

    decoder = ArrowDecoder(default_registry(), PING_CLASS, ["driver_id", "event_timestamp", "lat", "long"])
    secs, out, cpu = _best(lambda: decoder.decode(payloads), 2)
    batch = out[0]  # type: ignore[index]
    results["protobuf decode to Arrow"] = _stage(batch.num_rows, secs, cpu)

    lat, lng = batch.column("lat"), batch.column("long")
    secs, _, cpu = _best(lambda: s2.latlng_to_cell_id(lat.to_numpy(), lng.to_numpy(), S2_LEVEL))
    results["S2 cell id (numpy)"] = _stage(batch.num_rows, secs, cpu)
    level = pa.array([S2_LEVEL] * batch.num_rows, pa.int32())
    secs, _, cpu = _best(lambda: s2id_arrow(lat, lng, level))
    results["S2Id UDF body (ids + strings)"] = _stage(batch.num_rows, secs, cpu)

    from pyspark.sql import functions as F

    from job.functions.spark_udfs import register_functions
    from job.spark.session import build_session
    from job.sql import translate
    from job.sql.rewrite import BARRIER_COLUMN

    spark = build_session(
        "bench-components",
        master=f"local[{args.cores}]",
        shuffle_partitions=2,
        extra={"spark.driver.memory": "3g"},
    )
    register_functions(spark)
    fields = {
        "driver_id",
        "event_timestamp",
        "lat",
        "long",
        "driver_status",
        "service_type",
        "accuracy_m",
        "speed_kmh",
    }
    translation = translate(DRIVERS_SQL, {"data_stream": fields})
    # S2Id is computed by the Kafka source (job.sql.pushdown): add the columns it would add
    for col in translation.derived.get("data_stream", []):
        function = s2cell_arrow if col.function == "s2cell" else s2id_arrow
        batch = batch.append_column(
            col.name,
            function(
                batch.column(col.lat),
                batch.column(col.lng),
                pa.repeat(pa.scalar(col.level, pa.int32()), batch.num_rows),
            ),
        )
    table = pa.Table.from_batches([batch])
    df = (
        spark.createDataFrame(table)
        .withColumn("rowtime", F.col("event_timestamp"))
        .withColumn(BARRIER_COLUMN, F.rand())
    )
    df.createOrReplaceTempView("data_stream")
    sql = translation.spark_sql
    secs, result, cpu = _best(lambda: spark.sql(sql).toArrow(), 2)
    results["Spark aggregation (in-memory Arrow)"] = _stage(table.num_rows, secs, cpu, groups=result.num_rows)  # type: ignore[union-attr]
    # the same query with count(1) for DistinctCount: what the distinct sets cost
    count_sql = sql.replace("SIZE(COLLECT_SET(driver_id))", "COUNT(1)").replace(
        "size(collect_set(driver_id))", "COUNT(1)"
    )
    if count_sql != sql:
        secs, _, cpu = _best(lambda: spark.sql(count_sql).toArrow(), 2)
        results["Spark aggregation, count(1) instead of DistinctCount"] = _stage(table.num_rows, secs, cpu)
    spark.stop()

    from job.sinks.influx import InfluxSink
    from job.spec import InfluxSinkSpec

    sink = InfluxSink(
        InfluxSinkSpec(
            type="influx",
            url=args.influx,
            database=args.db,
            measurement="drivers_components",
            create_database=True,
        )
    )
    sink.open()
    c, t = _tree_cpu(), time.perf_counter()
    written = sink.write(result, 0)  # type: ignore[arg-type]
    secs = time.perf_counter() - t
    sink.close()
    results["InfluxDB write (InfluxSink), this process"] = _stage(written, secs, _tree_cpu() - c)
    Path(args.out).write_text(json.dumps({"pid": os.getpid(), "stages": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
