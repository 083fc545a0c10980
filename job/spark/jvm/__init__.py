"""Functions that run in Spark's JVM: Java sources shipped here, compiled on first use into one jar.

``DistinctCount`` (:file:`DistinctCount.java`): a Spark ``Aggregator`` whose buffer is one byte array of
the distinct values, sorted. Spark's ``size(collect_set(x))`` keeps a window key's values as an array
in the state store and, for every key a micro-batch touches, rebuilds a hash set of all of them, adds
the batch's few and writes the whole array back: on workload (a) live (~44,000 keys a batch, ~136
drivers a key at the window's end) that was 57% of the JVM's samples (JDK Flight Recorder,
docs/architecture.md). The byte array is merged by one pass of byte copies. ``WindowRecords``
(:file:`WindowRecords.java`): a micro-batch's records per window, which tells how many records Spark drops
as late (:mod:`job.query.late`). ``LocalCheckpointFileManager`` (:file:`LocalCheckpointFileManager.java`,
:file:`NioLocalFileSystem.java`): Spark's checkpoint file manager, writing a local checkpoint with no
``chmod`` process per file (:mod:`job.spark.session` sets it).

The jar is built with Janino, the Java compiler Spark ships for its generated code, by a ``java``
process (:func:`jar_path`), once per source and pyspark version, into the user's cache folder; a session
gets it through ``spark.jars`` (:func:`spark_conf`) and registers the functions (:func:`register`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from job.common.exits import how_it_ended
from job.errors import DaggerError

#: The SQL name of the DistinctCount aggregate (job.sql.rewrite emits it); it reads ``CAST(x AS BINARY)``.
DISTINCT_COUNT = "dagger_distinct_count"
#: The SQL name of DistinctCount over buffers the Kafka source made (job.sql.partial emits it).
DISTINCT_COUNT_MERGE = "dagger_distinct_count_merge"
#: The SQL name of the aggregate of a micro-batch's records per window (job.query.late observes it).
WINDOW_RECORDS = "dagger_window_records"
#: The Java sources, compiled together into one jar.
SOURCES = (
    Path(__file__).with_name("DistinctCount.java"),
    Path(__file__).with_name("DistinctCountMerge.java"),
    Path(__file__).with_name("WindowRecords.java"),
    Path(__file__).with_name("NioLocalFileSystem.java"),
    Path(__file__).with_name("LocalCheckpointFileManager.java"),
)
#: Spark's checkpoint file manager for a checkpoint on the local disk with no process per file
#: (:file:`LocalCheckpointFileManager.java`); :func:`spark_conf` sets it when the jar is there.
CHECKPOINT_FILE_MANAGER = "daggers.spark.LocalCheckpointFileManager"
#: The jar's location when set (a file; "off": no jar, DistinctCount keeps collect_set), else the cache.
JAR_ENV = "DAGGERS_JVM_JAR"
_DEMO = "org.codehaus.commons.compiler.samples.CompilerDemo"  # Janino's command-line compiler


class JvmFunctionsError(DaggerError):
    """The JVM functions' jar could not be built."""

    title = "JVM functions"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _key() -> str:
    """A short hash of the sources and the pyspark version the jar is compiled against."""
    import pyspark

    digest = hashlib.sha1(pyspark.__version__.encode())
    for source in SOURCES:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:12]


def jar_location() -> Path | None:
    """Where the jar is (or goes): ``$DAGGERS_JVM_JAR``, else ``$XDG_CACHE_HOME/daggers/jvm-functions-<key>.jar``
    (``~/.cache`` by default); None when turned off."""
    chosen = os.environ.get(JAR_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "daggers" / f"jvm-functions-{_key()}.jar"


def build(target: Path, timeout_s: float = 120) -> Path:
    """Compile :data:`SOURCES` with Janino and write the jar to ``target`` (atomically: a JVM starting
    meanwhile sees no jar or a whole one); return ``target``. Raises JvmFunctionsError when ``java`` or
    the compiler fails."""
    jars = _spark_jars()
    janino = [str(p) for name in ("janino-*.jar", "commons-compiler-*.jar") for p in sorted(jars.glob(name))]
    classpath = os.pathsep.join(str(p) for p in sorted(jars.glob("*.jar")))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="daggers-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        try:
            done = subprocess.run(
                [
                    _java(),
                    "-cp",
                    os.pathsep.join(janino),
                    _DEMO,
                    "-d",
                    str(classes),
                    "-classpath",
                    classpath,
                    *map(str, SOURCES),
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise JvmFunctionsError(
                f"could not run java to compile {', '.join(s.name for s in SOURCES)}: {exc}",
                hint="install a Java runtime (17 or later), or set JAVA_HOME",
            ) from None
        built = sorted(classes.rglob("*.class"))
        if done.returncode != 0 or not built or done.stdout.strip() or done.stderr.strip():
            said = (done.stderr or done.stdout).strip().splitlines()
            raise JvmFunctionsError(
                f"Janino did not compile {', '.join(s.name for s in SOURCES)}: "
                f"{said[0] if said else how_it_ended(done.returncode)}"
            )
        partial = target.with_name(f".{target.name}.{os.getpid()}.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in built:
                jar.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, target)
    return target


def jar_path() -> Path | None:
    """Return the jar, building it first when it is not there yet (~2 s, once per machine and version);
    None when turned off (``DAGGERS_JVM_JAR=off``). Raises JvmFunctionsError when it cannot be built."""
    target = jar_location()
    if target is None:
        return None
    if not target.is_file():
        build(target)
    return target


def holds(jar: Path, class_name: str) -> bool:
    """Return whether ``jar`` holds the class ``class_name`` (False when it cannot be read as a jar)."""
    entry = class_name.replace(".", "/") + ".class"
    try:
        with zipfile.ZipFile(jar) as opened:
            return entry in opened.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def checkpoint_file_manager() -> str | None:
    """Return :data:`CHECKPOINT_FILE_MANAGER` when the jar holds it; None when the jar is turned off or is one
    an earlier version built at ``$DAGGERS_JVM_JAR`` (without the class: Spark could not load it and every
    query would fail to start). Raises JvmFunctionsError when the jar cannot be built."""
    jar = jar_path()
    return CHECKPOINT_FILE_MANAGER if jar is not None and holds(jar, CHECKPOINT_FILE_MANAGER) else None


def spark_conf(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``spark.jars`` with the jar added to the one in ``extra`` (empty when turned off)."""
    jar = jar_path()
    if jar is None:
        return {}
    given = [j for j in (extra or {}).get("spark.jars", "").split(",") if j.strip()]
    return {"spark.jars": ",".join([*given, str(jar)])}


def available(spark: Any) -> bool:
    """Whether ``spark``'s JVM can load the functions (its session was built with :func:`spark_conf`)."""
    from py4j.java_gateway import JavaClass

    return isinstance(spark._jvm.daggers.spark.DistinctCount, JavaClass)


def register(spark: Any) -> bool:
    """Register :data:`DISTINCT_COUNT`, :data:`DISTINCT_COUNT_MERGE` and :data:`WINDOW_RECORDS` with ``spark``;
    return False
    (registering nothing) when its JVM cannot load the jar's classes, as in a session not built by
    :func:`job.spark.session.build_session`."""
    if not available(spark):
        return False
    jvm = spark._jvm
    binary = jvm.org.apache.spark.sql.Encoders.BINARY()
    udaf = jvm.org.apache.spark.sql.functions.udaf
    spark._jsparkSession.udf().register(DISTINCT_COUNT, udaf(jvm.daggers.spark.DistinctCount(), binary))
    spark._jsparkSession.udf().register(
        DISTINCT_COUNT_MERGE, udaf(jvm.daggers.spark.DistinctCountMerge(), binary)
    )
    longs = jvm.org.apache.spark.sql.Encoders.tuple(
        jvm.org.apache.spark.sql.Encoders.LONG(), jvm.org.apache.spark.sql.Encoders.LONG()
    )
    spark._jsparkSession.udf().register(WINDOW_RECORDS, udaf(jvm.daggers.spark.WindowRecords(), longs))
    return True
