"""Build the SparkSession a dagger runs in (``local[*]`` by default)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from job.errors import debug_enabled
from job.spark import jvm as jvm_functions
from job.spark import jvm_archive, scratch

#: Spark's logging when nobody asked for traces (DAGGERS_DEBUG unset): see the file.
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
#: Options of every JVM Spark starts for a dagger (the driver, and executors on a cluster).
#: ``NmethodSweepActivity=0``: JDK 17's code sweeper otherwise removes compiled methods it finds cold, and a
#: streaming query runs the same code for a few milliseconds at each trigger, which looks cold; the JIT
#: compiled them again at every turn. Measured on a shared host of 10 pass-through daggers: the JIT's
#: two threads took 0.51 of its 1.02 cores, 96 compilations a second, with no new class loaded. The code
#: cache (240 MB) holds all of it: 65 MB at most was used. Later JDKs have no sweeper and ignore the flag.
#: ``TrimNativeHeapInterval``: glibc keeps the memory a thread's malloc arena freed for that arena to reuse, and
#: a JVM with a hundred threads of queries (RocksDB, compression codecs, JNI) saw its arenas grow without end:
#: a shared host of 100 light daggers and a heavy one, 491 -> 709 MB of arenas in 8 minutes while the heap
#: stayed at its cap; one ``malloc_trim`` (``jcmd <pid> System.trim_native_heap``) gave back 614 MB at once:
#: memory freed, not leaked. The JVM now trims every 30 s (JDK 17.0.9 and later; older ones ignore it).
JVM_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "-XX:NmethodSweepActivity=0",
    "-XX:TrimNativeHeapInterval=30000",
)

#: More options for every JVM a dagger starts, its driver and its executors (space-separated, as a shell splits
#: them), after the defaults: e.g. ``-XX:TieredStopAtLevel=1`` (the quick JIT compiler only) for JVMs that live
#: a few minutes, as the tests'. The local standalone cluster's master and workers get them too
#: (:mod:`job.stack.spark_standalone`).
JVM_OPTIONS_ENV = "DAGGERS_JVM_OPTIONS"

#: Spark's state store providers: RocksDB (the sessions' default) and the one in the JVM's heap.
ROCKSDB_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_STATE_STORE = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: Classes Spark's code generator keeps compiled, least recently used first out (Spark's default: 100). A
#: streaming query compiles 20-40 classes when it starts (projections, predicates, whole-stage code, the state
#: store's), and looks them up again in every micro-batch: a JVM whose queries need more than 100 in all (a
#: shared host of a few daggers, a session that runs queries in turn) evicted each class before its next use
#: and compiled everything again at every batch. Measured on six flink-compat queries run in turn, three
#: times in one session: 22-40 compilations a query on every round at 100, none after the first at 2,000;
#: 87 queries kept +1.8 MB of metaspace. A spec's spark_conf may set another size.
CODEGEN_CACHE_ENTRIES = 2000
#: How checkpoint files are written (see build_session): Spark's manager through Hadoop's FileSystem, or,
#: with the JVM functions' jar (one that holds it), its subclass that writes a local checkpoint with no
#: process per file.
SPARK_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep Spark on the loopback address."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def build_session(
    app_name: str,
    master: str = "local[*]",
    shuffle_partitions: int = 2,
    ui: bool = False,
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Return a SparkSession tuned for small streaming aggregations on one machine.

    ``extra`` settings override the defaults.
    """
    prepare_environment()
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.driver.memory": "1g",
        "spark.sql.adaptive.enabled": "false",
        "spark.python.worker.reuse": "true",
        # every Python worker forked with pyarrow, pandas, the Kafka source and the UDFs imported (job.spark.worker_daemon)
        "spark.python.daemon.module": "job.spark.worker_daemon",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_STATE_STORE,
        # A commit writes a changelog of the batch's changes instead of a snapshot of the whole state.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Skips a read before every write that only keeps the numRowsTotal metric exact.
        "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
        # Checkpoint files (offsets, commits, metadata, state) renamed into place through Hadoop's FileSystem:
        # the default (FileContext) asks for the target's link status on every rename, which without
        # Hadoop's native library starts a `readlink` process per file: 616 of the 854 processes one
        # tumbling-window dagger started in 7 runs, ~1.7 -> ~1.3 core-s a run. Hadoop's local file system
        # also starts a `chmod` process for every file and folder it creates: the jar's manager sets the
        # same permission by a system call: an aggregation's 24 micro-batches (2 state partitions) started
        # 230 -> 11 processes (the rest: RocksDB's snapshot uploads, which take Hadoop's file system
        # directly). A rename on a local disk (or HDFS) is atomic either way; a spec's spark_conf may set
        # another class.
        "spark.sql.streaming.checkpointFileManagerClass": (
            jvm_functions.checkpoint_file_manager() or SPARK_CHECKPOINT_FILE_MANAGER
        ),
        # SELECT ... FROM text.`/path` reads a file: a dagger's query reads its streams only
        "spark.sql.runSQLOnFiles": "false",
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # Spark starts its Python workers as `python -m pyspark.daemon` in the executor's folder: this keeps a
        # pyspark.py (or any module) in that folder off their import path (job/shared/spark_python.sh too)
        "spark.executorEnv.PYTHONSAFEPATH": "1",
        **(extra or {}),
        # the functions that run in the JVM (job.spark.jvm: DistinctCount), registered by register_functions
        **jvm_functions.spark_conf(extra),
    }
    if "spark.local.dir" not in conf and not os.environ.get("SPARK_LOCAL_DIRS"):
        # RocksDB's working copies, shuffle blocks: in a folder of this process's, which the next session
        # built anywhere removes if this process is killed (Spark's own clean-up is a shutdown hook)
        conf["spark.local.dir"] = str(scratch.claim())
    quiet = () if debug_enabled() else (f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J}",)
    more = shlex.split(os.environ.get(JVM_OPTIONS_ENV, ""))
    driver = (*JVM_OPTIONS, *jvm_archive.java_options(), *more, *quiet)
    # The executors map the archive too (their class path is the driver's): on a local standalone cluster each
    # executor's JVM took 7.5-8.0 -> 5.1-5.8 core-s (tests/job/test_cluster_run.py). A machine without the file,
    # or with another JDK or pyspark, ignores the option silently.
    for key, options in (
        ("spark.driver.extraJavaOptions", driver),
        ("spark.executor.extraJavaOptions", (*JVM_OPTIONS, *jvm_archive.java_options(), *more)),
    ):
        # Spark splits the string as a shell would: quoted, an option keeps its spaces
        conf[key] = f"{shlex.join(options)} {conf[key]}" if key in conf else shlex.join(options)
    _launch_gateway_apart({"spark.master": master, "spark.app.name": app_name, **conf})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _launch_gateway_apart(conf: dict[str, str]) -> None:
    """Start this process's JVM in a session of its own (unless one runs already).

    Ctrl-C in a terminal signals the whole foreground process group. PySpark starts the JVM with SIGINT
    ignored, but its Python workers turn it back on and print KeyboardInterrupt tracebacks; in their own
    session neither the JVM nor its workers get the terminal's signals. The driver stops the query
    itself, and the JVM exits when this process does (its stdin pipe closes).
    """
    if SparkContext._gateway is not None or not _terminal_foreground():
        return
    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    # pyspark's launch_gateway has no annotations
    gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=spark_conf)


def _terminal_foreground() -> bool:
    """Return whether this process is in its terminal's foreground process group (Ctrl-C reaches it).

    Only then is the JVM started in a session of its own. A process without a terminal (a controller's
    dagger, a shared host, a test) keeps the JVM in its process group, so that whoever stops the group
    (the controller, a test's clean-up) stops the JVM with it."""
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


@contextmanager
def borrowed_session(app_name: str, **kwargs: Any) -> Iterator[SparkSession]:
    """Yield the SparkSession this process already runs, left running afterwards, or else a new one
    (:func:`build_session` with ``kwargs``), stopped afterwards: stopping a running one would stop every
    other query of the process (a test's, a caller's)."""
    running = running_session()
    spark = running or build_session(app_name, **kwargs)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()


def running_session() -> SparkSession | None:
    """Return the SparkSession this process already runs (from any thread), or None.

    Code that would build a session of its own and stop it afterwards uses this one instead and
    leaves it running: stopping it would stop every other query of the process.
    """
    session = SparkSession._instantiatedSession  # getActiveSession() is per thread
    if session is None or getattr(session.sparkContext, "_jsc", None) is None:
        return None
    return session


@contextmanager
def active_session(session: SparkSession) -> Iterator[None]:
    """Make ``session`` the calling thread's active session in the JVM for the block, then put back the one
    before (or none).

    Spark 4.3 looks a Python data source up in the thread's *active* session (``DataSource.lookupDataSource``),
    and refuses to register one whose name that lookup already finds: a session whose parent (of
    ``newSession()``) had registered the Kafka source could neither register it nor find it
    (:func:`job.sources.kafka.register_source` registers with the session active)."""
    jclass = SparkSession._get_j_spark_session_class(session._jvm)
    before = jclass.getActiveSession()
    jclass.setActiveSession(session._jsparkSession)
    try:
        yield
    finally:
        if before.isDefined():
            jclass.setActiveSession(before.get())
        else:
            jclass.clearActiveSession()
