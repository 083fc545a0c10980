"""The JVM's class archive (job.spark.jvm_archive): where it lives, when a driver JVM is told to map it, and
that a real JVM maps one `daggers jvm-archive` wrote (the one scripts/setup.sh wrote, when there is one), and
ignores a broken one without a word; and that DAGGERS_JVM_OPTIONS reach the driver JVM, and the JVM trims its
native heap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from job.spark import jvm_archive
from job.spark.session import JVM_OPTIONS_ENV

REPO = Path(__file__).resolve().parents[2]

# Starts a session (whose driver JVM gets job.spark.jvm_archive.java_options()), runs a query, and says whether the
# JVM mapped the archive, and which of the probe's DAGGERS_JVM_OPTIONS it was given.
PROBE = """
import json, os
from job.spark.session import build_session
spark = build_session("archive-probe", master="local[1]")
total = spark.range(1000).selectExpr("sum(id) AS s").collect()[0]["s"]
pid = spark.sparkContext._gateway.proc.pid
maps = open(f"/proc/{pid}/maps").read()
argv = open(f"/proc/{pid}/cmdline").read().split(chr(0))
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({"sum": total, "mapped": os.environ["DAGGERS_JVM_ARCHIVE"] in maps,
                  "options": [a for a in argv if a.startswith("-Ddaggers.probe")],
                  "trim_ms": bean.getVMOption("TrimNativeHeapInterval").getValue()}))
spark.stop()
"""


def test_the_archive_lives_where_the_environment_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, str(tmp_path / "a.jsa"))
    assert jvm_archive.archive_path() == tmp_path / "a.jsa"
    assert jvm_archive.java_options() == ()  # not written yet
    (tmp_path / "a.jsa").write_bytes(b"x")
    assert jvm_archive.java_options() == (f"-XX:SharedArchiveFile={tmp_path / 'a.jsa'}", "-Xlog:cds*=off")
    monkeypatch.setenv(jvm_archive.ARCHIVE_ENV, "off")
    assert jvm_archive.archive_path() is None and jvm_archive.java_options() == ()
    with pytest.raises(jvm_archive.ArchiveError, match="turned off"):
        jvm_archive.build()


def test_by_default_it_is_in_the_cache_folder_named_by_the_jdk_and_pyspark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(jvm_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = jvm_archive.archive_path()
    assert path == tmp_path / "daggers" / f"jvm-{jvm_archive.key()}.jsa"
    assert len(jvm_archive.key()) == 12
    monkeypatch.setattr("pyspark.__version__", "0.0.1")
    assert jvm_archive.archive_path() != path  # another pyspark: another archive


def test_pyspark_installed_again_in_the_same_place_gets_another_archive(tmp_path: Path) -> None:
    (tmp_path / "spark-core.jar").write_bytes(b"x" * 10)
    first = jvm_archive.key(tmp_path)
    assert jvm_archive.key(tmp_path) == first
    os.utime(
        tmp_path / "spark-core.jar", ns=(1, 1)
    )  # the same jar written again: the JVM would not map the old archive
    assert jvm_archive.key(tmp_path) != first


def _probe(env: dict[str, str]) -> subprocess.Popen[str]:
    """Start the probe with ``env``; ``_probed`` reads what it says."""
    return subprocess.Popen(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _probed(proc: subprocess.Popen[str]) -> tuple[dict, str]:
    """Return the probe's JSON line and its whole output, once it ended; AssertionError when it failed."""
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    lines = out.strip().splitlines()
    return json.loads(lines[-1]), out + err


@pytest.mark.integration
@pytest.mark.slow
def test_a_jvm_maps_the_archive_written_and_ignores_a_broken_one(tmp_path: Path) -> None:
    archive = tmp_path / "spark.jsa"
    env = {
        **os.environ,
        jvm_archive.ARCHIVE_ENV: str(archive),
        JVM_OPTIONS_ENV: "-Ddaggers.probe=1 '-Ddaggers.probe.two=a b'",
    }
    written = jvm_archive.archive_path()
    if written is not None and written.is_file():
        # scripts/setup.sh wrote it with `daggers jvm-archive` (~60 core-s): a copy, which the test may break
        shutil.copyfile(written, archive)
    else:
        done = subprocess.run(
            [sys.executable, "-m", "job.cli", "jvm-archive"],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"wrote {archive}" in done.stdout
        assert not list(tmp_path.glob(".*.part"))
    assert archive.stat().st_size > 50e6

    # a broken (or another JDK's) archive: started without it, silently; both JVMs start at once
    broken = tmp_path / "broken.jsa"
    broken.write_bytes(os.urandom(4096))
    probes = [_probe(env), _probe({**env, jvm_archive.ARCHIVE_ENV: str(broken)})]
    try:
        (got, _), (got_broken, output) = [_probed(p) for p in probes]
    finally:
        for p in probes:
            if p.poll() is None:
                p.kill()
                p.wait()
    # (and the JVM trims its native heap: job.spark.session.JVM_OPTIONS)
    assert got == {
        "sum": 499500,
        "mapped": True,
        "options": ["-Ddaggers.probe=1", "-Ddaggers.probe.two=a b"],
        "trim_ms": "30000",
    }
    assert got_broken["sum"] == 499500 and got_broken["mapped"] is False
    assert "cds" not in output.lower() and "shared archive" not in output.lower()
