"""Apache Flink as a peer of workload (a) in bench/run.py, and Daggers running Flink's built-in-key query.

Peers (``--peers`` names):

* ``flink-udf``: Flink SQL, the level-13 S2 cell from a PyFlink Python UDF (s2sphere), COUNT(DISTINCT);
* ``flink-builtin``: Flink SQL with a key of built-in functions only (``CAST(FLOOR(lat * 100) AS BIGINT)``,
  ``CAST(FLOOR(long * 100) AS BIGINT)``): the engine's ceiling, no Python in the path;
* ``engine-builtin``: Daggers (``job.cli run``, from the broker) running that same built-in query with
  ``DistinctCount``, checked against expected values computed here with numpy.

**Flink reads files, Daggers reads a broker.** No Flink Kafka connector jar is reachable here: the
same events (regenerated with the pre-load's seeds) are written as CSV files, one per task, for
Flink, while Daggers reads them as protobuf from the broker. Flink runs in its own virtualenv
(``bench/setup_flink.sh``); a Flink peer is "not run" without it.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from bench.procstats import TreeSampler, load_average
from bench.workloads import BENCH_START, WINDOW_S, Points, Workload

ROOT = Path(__file__).resolve().parents[1]
FLINK_PEERS = ("flink-udf", "flink-builtin")
BUILTIN_PEERS = ("engine-builtin",)
FLINK_PYTHON = Path(os.environ.get("DAGGERS_FLINK_VENV", ROOT / "bench" / ".flink-venv")) / "bin" / "python"
CHUNK = 500_000  # the pre-load's chunk of generated events (bench/run.py preload): the same seeds

BUILTIN_SQL = f"""SELECT CAST(FLOOR(lat * 100) AS BIGINT) AS tag_lat_bin,
       CAST(FLOOR(long * 100) AS BIGINT) AS tag_long_bin,
       DistinctCount(driver_id) AS drivers,
       TUMBLE_END(rowtime, INTERVAL '{WINDOW_S}' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '{WINDOW_S}' SECOND), CAST(FLOOR(lat * 100) AS BIGINT), CAST(FLOOR(long * 100) AS BIGINT)"""


@dataclasses.dataclass
class FlinkInput:
    """The pre-loaded events as Flink reads them, and the built-in query's expected points."""

    folder: Path
    events: int
    builtin_expected: Points


def regenerate(w: Workload, events: int) -> pa.Table:
    """Return the data events of the pre-load (bench/run.py ``preload``: the same chunks and seeds), without
    the closers."""
    tables = []
    for i, lo in enumerate(range(0, events, CHUNK)):
        n = min(CHUNK, events - lo)
        tables.append(
            w.make(
                n, 1000 + i, BENCH_START + timedelta(seconds=lo / w.default_density), w.default_density
            ).table
        )
    return pa.concat_tables(tables)


def expected_builtin(table: pa.Table) -> Points:
    """Return (window end s, lat bin, long bin) -> (distinct drivers,) with numpy: bins are
    floor(degrees * 100) as text (InfluxDB tags)."""
    micros = table.column("event_timestamp").cast(pa.int64()).to_numpy()
    end = (micros // 1_000_000 // WINDOW_S + 1) * WINDOW_S
    lat_bin = np.floor(table.column("lat").to_numpy() * 100).astype(np.int64)
    long_bin = np.floor(table.column("long").to_numpy() * 100).astype(np.int64)
    t = pa.table({"end": end, "la": lat_bin, "lo": long_bin, "driver": table.column("driver_id")})
    g = t.group_by(["end", "la", "lo"]).aggregate([("driver", "count_distinct")])
    return {
        (int(e), str(a), str(b)): (int(n),)
        for e, a, b, n in zip(
            g["end"].to_pylist(),
            g["la"].to_pylist(),
            g["lo"].to_pylist(),
            g["driver_count_distinct"].to_pylist(),
            strict=True,
        )
    }


def write_input(w: Workload, events: int, folder: Path, parts: int) -> FlinkInput:
    """Write the pre-load's events as ``parts`` CSV files (driver_id, lat, long, event time in ms; every
    ``parts``-th event in each, so each file is in time order) under ``folder``; return them with the
    built-in query's expected points."""
    table = regenerate(w, events)
    folder.mkdir(parents=True, exist_ok=True)
    ms = table.column("event_timestamp").cast(pa.timestamp("ms", tz="UTC"), safe=False)
    out = pa.table(
        {
            "driver_id": table.column("driver_id"),
            "lat": table.column("lat"),
            "long": table.column("long"),
            "event_time": pc.strftime(ms, format="%Y-%m-%d %H:%M:%S"),
        }
    )
    index = np.arange(out.num_rows)
    for k in range(parts):
        pacsv.write_csv(
            out.take(pa.array(index[k::parts])),
            folder / f"pings-{k}.csv",
            write_options=pacsv.WriteOptions(include_header=False, quoting_style="none"),
        )
    return FlinkInput(folder, events, expected_builtin(table))


def read_output(folder: Path, mode: str) -> Points:
    """Return the points the Flink job wrote as CSV under ``folder`` (in-progress part files too)."""
    out: Points = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with path.open(newline="") as fh:
            for rec in csv.reader(fh):
                if not rec:
                    continue
                end = int(datetime.fromisoformat(rec[-1].strip('"') + "+00:00").timestamp())
                keys = tuple(rec[:-2])
                out[(end, *keys)] = (int(rec[-2]),)
    return out


def run_flink_peer(
    peer: str,
    w: Workload,
    expected: Points,
    flink_input: FlinkInput,
    folder: Path,
    args: argparse.Namespace,
    spawn: Any,
    stop: Any,
    compare: Any,
    result_cls: Any,
    label: str | None = None,
) -> Any:
    """Run Flink (``peer``: flink-udf or flink-builtin) over the CSV files until its job ends; return a
    RunResult (``result_cls``): events/s from job submission to its end, peak memory and CPU over that
    time, the points checked against ``expected``. ``spawn``/``stop``/``compare`` are bench/run.py's.
    ``label`` names the run (``flink-udf_2``: a repeated run), the peer by default: its output folder,
    timings and log, so that a run reads only what it wrote."""
    label = label or peer
    mode = peer.split("-", 1)[1]
    res = result_cls(label, load_before=load_average())
    if not FLINK_PYTHON.exists():
        res.check = "not run"
        res.note = f"not run: no Flink virtualenv at {FLINK_PYTHON.parent.parent} (bash bench/setup_flink.sh)"
        return res
    out = folder / f"{label}-out"
    timings = folder / f"{label}-timings.json"
    log = folder / f"a-{label}.log"
    proc = spawn(
        [
            str(FLINK_PYTHON),
            str(ROOT / "bench/peers/flink_peer.py"),
            "--mode",
            mode,
            "--events",
            str(flink_input.folder),
            "--out",
            str(out),
            "--timings",
            str(timings),
            "--parallelism",
            str(args.cores),
        ],
        log,
        cores=args.cores,
    )
    sampler = TreeSampler(proc.pid).start()
    try:
        proc.wait(timeout=args.engine_timeout + args.peer_timeout)
    except Exception:  # noqa: BLE001 - a timeout: what it did is not a result
        res.note = f"did not end within {args.engine_timeout + args.peer_timeout:.0f} s"
    finally:
        sampler.stop()
        stop(proc, timeout=30)
    if not timings.exists():
        res.check = "no result"
        res.note = res.note or _tail(log)
        return res
    t = json.loads(timings.read_text())
    res.events = flink_input.events
    res.seconds = t["done"] - t["submitted"]
    res.events_per_s = res.events / res.seconds
    res.startup_s = t["submitted"] - t["started"]
    res.complete = True
    res.driver_peak_mb = sampler.peak_rss(("driver-python", "jvm"), t["submitted"], t["done"]) / 2**20
    res.worker_peak_mb = sampler.peak_rss(("worker",), t["submitted"], t["done"]) / 2**20
    res.job_cores = sampler.cpu_cores(t["submitted"], t["done"])
    res.cpu_us_per_event = res.job_cores * res.seconds / res.events * 1e6
    res.load_after = load_average()
    res.check = compare(expected, read_output(out, mode), w)
    res.note = "reads local CSV files (Daggers reads the broker)"
    return res


def builtin_workload(w: Workload) -> Workload:
    """Return workload (a) with the built-in-key query (its own name, measurement and tags)."""
    return dataclasses.replace(
        w,
        key="a-builtin",
        name="bench-drivers-grid",
        sql=BUILTIN_SQL,
        measurement="drivers_grid",
        tags=("tag_lat_bin", "tag_long_bin"),
        expected=expected_builtin,
    )


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
