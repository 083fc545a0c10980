"""A class-data-sharing (CDS) archive of the classes a dagger's JVM loads, so that every later JVM maps
them instead of loading, parsing and verifying ~10,000 classes from Spark's jars again.

Measured on this 2-core machine (a new JVM, ``local[2]``, a small aggregation): start 5.2 → 3.0 s,
the JVM's CPU 13.4 → 7.8 core-s; a dagger run by hand reached its first point in 0.79x the time on 0.78x
the CPU (``bench/bench_jvm_archive.py``). Every dagger, shared host and test JVM starts that much quicker.

:func:`build` runs a small streaming query (a Python data source, a window with a watermark, the
RocksDB and the heap state stores, foreachBatch) in a JVM that writes what it loaded at exit
(``-XX:ArchiveClassesAtExit``, JDK 13+); :func:`java_options` names it to each later driver JVM.
The JVM checks the archive against its own version and class path (each jar's size and time) and ignores
one that does not match (a pyspark or a JDK upgraded, or pyspark installed again, since): the dagger then
starts as it would without it, and the key in the archive's file name (:func:`key`) makes the next
:func:`build` write a new one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from job.common.exits import how_it_ended
from job.errors import DaggerError, debug_enabled

#: Where the archive lives: this file when set ("off" turns the archive off), else the user's cache folder.
ARCHIVE_ENV = "DAGGERS_JVM_ARCHIVE"
#: The JVM's CDS messages (a mismatched archive, signed jars it skips) would go to the dagger's stdout.
QUIET = "-Xlog:cds*=off"


class ArchiveError(DaggerError):
    """The archive could not be written."""

    title = "JVM archive"


def _java() -> Path:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return (Path(home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else Path("java")


def key(jars: Path | None = None) -> str:
    """Return a short hash of what the archive depends on: the JDK, pyspark's version and jars folder, and
    each jar's size and time. The JVM checks the jars it maps classes of by their size and time, so pyspark
    installed again in the same place (a venv made again) needs a new archive: with the old one's key the
    JVMs would ignore it, silently, and ``jvm-archive --check`` would still find it. ``jars``: pyspark's
    jars folder unless given."""
    import pyspark

    java = _java()
    release = java.parent.parent / "release"
    jars = jars or Path(pyspark.__file__).resolve().parent / "jars"
    stamps = []
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        stamps.append(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}")
    parts = [
        str(java),
        release.read_text(errors="replace") if release.exists() else "",
        pyspark.__version__,
        str(jars),
        *stamps,
    ]
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:12]


def archive_path() -> Path | None:
    """Return where the archive is (or goes): ``$DAGGERS_JVM_ARCHIVE``, else
    ``$XDG_CACHE_HOME/daggers/jvm-<key>.jsa`` (``~/.cache`` by default); None when turned off."""
    chosen = os.environ.get(ARCHIVE_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "daggers" / f"jvm-{key()}.jsa"


def java_options() -> tuple[str, ...]:
    """Return the driver JVM's options that map the archive: none when there is no archive (or it is off)."""
    path = archive_path()
    if path is None or not path.is_file():
        return ()
    return (f"-XX:SharedArchiveFile={path}", QUIET)


def build(path: Path | None = None, timeout_s: float = 600) -> tuple[Path, float]:
    """Write the archive (to ``path``, else :func:`archive_path`) and return where, and its size in MB.

    The JVM writes it to a temporary file next to it, renamed into place once complete, so that a JVM
    starting meanwhile maps either the old archive or the new one. Raises ArchiveError when the run
    fails or writes nothing.
    """
    target = path or archive_path()
    if target is None:
        raise ArchiveError(
            f"the archive is turned off ({ARCHIVE_ENV}=off)",
            hint=f"unset {ARCHIVE_ENV}, or name the file to write (daggers jvm-archive --path FILE)",
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArchiveError(
            f"cannot make the folder {target.parent}: {exc.strerror}",
            hint="name a file in a folder you can write (daggers jvm-archive --path FILE)",
        ) from exc
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    partial.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "job.query.jvm_workload", str(partial)],
        capture_output=not debug_enabled(),
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        last = ((done.stderr or "").strip().splitlines() or [how_it_ended(done.returncode)])[-1]
        raise ArchiveError(
            f"the JVM did not write its class archive ({last})",
            hint="daggers --debug jvm-archive shows Spark's own output",
        )
    os.replace(partial, target)
    return target, target.stat().st_size / 1e6
