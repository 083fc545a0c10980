"""Health of a cluster: its Spark master and workers, its Kafka brokers, its InfluxDB.

* Spark standalone: the master's JSON API (``http://host:webui/json/``) gives the workers (alive or
  not, cores and memory used and free, last heartbeat) and the running applications (cores, memory
  per executor, running for how long). ``local``
  masters are the gateway machine itself: its cores and memory (``/proc/meminfo``).
* Kafka: a metadata request (brokers, topics, partitions) with confluent-kafka.
* InfluxDB: ``/ping`` (and the version header it answers with).

Each probe returns a dict and never raises: an unreachable part is ``ok: False`` with the error, and
``refused: True`` when the connection was refused (nothing listens: a dead part, not a slow one).

A busy machine makes a probe slow, not failed: its timeout counts only the time this process had the CPU
(:class:`job.sources.stall.Starvation`, as the Kafka source's reads do) and at least its timeout times the
machine's load per core in wall time (:class:`Patience`), so a probe that went unanswered while the process
waited for a core is tried again for the time it lost. A probe that gives up before its timeout was real is
``starved``. The controller counts a part's unanswered probes in a row whose timeouts were real
(:func:`count_failures`); the health model calls a part down only after two of them, or one refused
connection.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import requests

from job.common.words import counted

DEFAULT_SPARK_UI_PORT = 8080


def spark_ui_url(spark_master: str, spark_ui_url: str | None) -> str | None:
    """Return the master web UI URL: the configured one, else ``http://<master host>:8080`` for a
    ``spark://`` master, else None (local mode has no master)."""
    if spark_ui_url:
        return spark_ui_url.rstrip("/")
    if spark_master.startswith("spark://"):
        host = urlparse(spark_master.replace("spark://", "http://", 1).split(",")[0]).hostname
        return f"http://{host}:{DEFAULT_SPARK_UI_PORT}"
    return None


def _meminfo() -> tuple[int, int]:
    """Return (total, available) memory of this machine in MiB (0, 0 when unknown)."""
    values: dict[str, int] = {}
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return 0, 0
    return values.get("MemTotal", 0) // 1024, values.get("MemAvailable", 0) // 1024


def local_cores(master: str) -> int:
    """Return the cores a ``local``/``local[N]``/``local[*]`` master uses on this machine."""
    cpus = os.cpu_count() or 1
    if "[" not in master:
        return 1
    inside = master[master.find("[") + 1 : master.find("]")].split(",")[0].strip()
    return int(inside) if inside.isdigit() else cpus


#: A probe waits at most this many times its timeout in wall time, however starved the process is (more on a
#: loaded machine: as many times as its load per core, up to :data:`MAX_LOAD_FACTOR`).
MAX_WAIT_FACTOR = 4.0
#: The most a machine's load per core stretches a probe's wait.
MAX_LOAD_FACTOR = 10.0


def load_per_core() -> float:
    """Return the machine's 1-minute load average per core (0 where unknown)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


class Patience:
    """How long a probe waits for an answer, and whether its timeout was real: the probe had the CPU for its
    timeout (:class:`job.sources.stall.Starvation`), and at least its timeout times the machine's load per
    core (up to :data:`MAX_LOAD_FACTOR`) passed in wall time. It gives up then, or after
    :data:`MAX_WAIT_FACTOR` times its timeout (the load factor when larger) in wall time: that timeout is
    not real (a starved probe: the part is slow, not down)."""

    def __init__(self, timeout: float) -> None:
        from job.sources.stall import starvation

        self.timeout = timeout
        self._starved = starvation()
        self._lost_at, self._started = self._starved.lost(), time.monotonic()
        factor = min(max(load_per_core(), 1.0), MAX_LOAD_FACTOR)
        self._need_s = timeout * factor
        self._cap_s = timeout * max(MAX_WAIT_FACTOR, factor)
        self.real = False

    def over(self) -> bool:
        """Return True when the probe should give up (and set :attr:`real`)."""
        waited, lost = time.monotonic() - self._started, self._starved.lost() - self._lost_at
        self.real = waited - lost >= self.timeout and waited >= self._need_s
        return self.real or waited >= self._cap_s


def patient_get(url: str, timeout: float, patience: Patience | None = None) -> requests.Response:
    """GET ``url`` with a timeout that counts only the time this process had the CPU (see
    :class:`Patience`; pass one to learn whether a timeout was real).

    Raises requests.RequestException as ``requests.get`` does (the last attempt's).
    """
    wait = patience or Patience(timeout)
    while True:
        try:
            return requests.get(url, timeout=timeout)
        except (requests.Timeout, requests.ConnectionError) as exc:
            if _refused(exc):
                wait.real = True
                raise
            if wait.over():
                raise


def _refused(exc: BaseException) -> bool:
    """Return True when ``exc`` (or what caused it) is a refused connection."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = (
            seen.__cause__
            or seen.__context__
            or (seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None)
        )
    return False


def probe_spark(spark_master: str, ui_url: str | None, timeout: float = 3.0) -> dict[str, Any]:
    """Return the Spark part of the health: mode, status, workers, cores and memory used/free, apps."""
    url = spark_ui_url(spark_master, ui_url)
    if url is None:
        total, free = _meminfo()
        cores = local_cores(spark_master)
        return {
            "ok": True,
            "mode": "local",
            "master": spark_master,
            "status": "LOCAL",
            "workers_alive": 1,
            "workers": 1,
            "cores": cores,
            "cores_used": 0,
            "memory_mb": total,
            "memory_used_mb": total - free,
            "active_apps": None,
            "error": None,
        }
    wait = Patience(timeout)
    try:
        resp = patient_get(f"{url}/json/", timeout, wait)
        resp.raise_for_status()
        data = resp.json()
    except (requests.RequestException, ValueError) as exc:
        return {
            "ok": False,
            "mode": "standalone",
            "master": spark_master,
            "status": "UNREACHABLE",
            "refused": _refused(exc),
            "starved": isinstance(exc, requests.Timeout | requests.ConnectionError) and not wait.real,
            "error": f"{url}/json/: {type(exc).__name__}: {str(exc)[:200]}",
        }
    workers = [
        {
            "id": w.get("id"),
            "host": w.get("host"),
            "state": w.get("state"),
            "cores": w.get("cores"),
            "cores_used": w.get("coresused"),
            "cores_free": w.get("coresfree"),
            "memory_mb": w.get("memory"),
            "memory_used_mb": w.get("memoryused"),
            "memory_free_mb": w.get("memoryfree"),
            "last_heartbeat_ms": w.get("lastheartbeat"),
        }
        for w in data.get("workers") or []
    ]
    apps = [
        {
            "id": a.get("id"),
            "name": a.get("name"),
            "user": a.get("user"),
            "state": a.get("state"),
            "cores": a.get("cores"),
            "memory_per_executor_mb": a.get("memoryperexecutor"),
            "started_ms": a.get("starttime"),
            "duration_ms": a.get("duration"),
        }
        for a in data.get("activeapps") or []
    ]
    alive = [w for w in workers if w["state"] == "ALIVE"]
    status = str(data.get("status", "UNKNOWN"))
    return {
        "ok": status == "ALIVE" and bool(alive),
        "mode": "standalone",
        "master": spark_master,
        "status": status,
        "workers_alive": len(alive),
        "workers": len(workers),
        "cores": int(data.get("cores") or 0),
        "cores_used": int(data.get("coresused") or 0),
        "memory_mb": int(data.get("memory") or 0),
        "memory_used_mb": int(data.get("memoryused") or 0),
        "active_apps": [a["name"] for a in apps],
        "app_list": apps,
        "worker_list": workers,
        "error": None if alive else "no ALIVE worker",
    }


def probe_kafka(bootstrap: str, timeout: float = 3.0) -> dict[str, Any]:
    """Return the Kafka part of the health: reachable, brokers, topics and partitions."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "log_level": 0}
    )
    wait = Patience(timeout)
    while True:
        try:
            md = admin.list_topics(timeout=timeout)
            break
        except KafkaException as exc:
            error = str(exc.args[0] if exc.args else exc)[:200]
            refused = _all_refuse(bootstrap)
            if refused or wait.over():
                starved = not refused and not wait.real
                return {
                    "ok": False,
                    "bootstrap": bootstrap,
                    "refused": refused,
                    "starved": starved,
                    "error": error,
                }
    topics = {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")}
    return {
        "ok": True,
        "bootstrap": bootstrap,
        "brokers": len(md.brokers),
        "topics": len(topics),
        "partitions": sum(topics.values()),
        "error": None,
    }


def list_topics(bootstrap: str, timeout: float = 5.0) -> list[str]:
    """Return the topic names on the broker, sorted (internal ``__`` topics left out).

    Raises SourceError when the broker does not answer.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from job.errors import SourceError

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "log_level": 0}
    )
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise SourceError(
            f"cannot list the topics of {bootstrap}: {exc.args[0] if exc.args else exc}"
        ) from None
    return sorted(name for name in md.topics if not name.startswith("__"))


def probe_influx(url: str, timeout: float = 3.0) -> dict[str, Any]:
    """Return the InfluxDB part of the health: ``/ping`` answered with 204, and the version."""
    wait = Patience(timeout)
    try:
        resp = patient_get(f"{url.rstrip('/')}/ping", timeout, wait)
    except requests.RequestException as exc:
        return {
            "ok": False,
            "url": url,
            "refused": _refused(exc),
            "starved": isinstance(exc, requests.Timeout | requests.ConnectionError) and not wait.real,
            "error": f"{type(exc).__name__}: {str(exc)[:200]}",
        }
    ok = resp.status_code == 204
    return {
        "ok": ok,
        "url": url,
        "version": resp.headers.get("X-Influxdb-Version"),
        "error": None if ok else f"/ping answered {resp.status_code}",
    }


def probe_cluster(
    spark_master: str,
    spark_ui: str | None,
    kafka_bootstrap: str,
    influx_url: str,
    *,
    daggers_running: int,
    daggers_total: int,
    timeout: float = 3.0,
    answered: set[str] | None = None,
) -> dict[str, Any]:
    """Probe the three parts in parallel; return ``{ok, checked_at, spark, kafka, influx, daggers}``. Each part
    that answers (or gives up) is added to ``answered`` as it does: a caller can tell which probe still waits."""
    with ThreadPoolExecutor(3) as pool:
        spark = pool.submit(probe_spark, spark_master, spark_ui, timeout)
        kafka = pool.submit(probe_kafka, kafka_bootstrap, timeout)
        influx = pool.submit(probe_influx, influx_url, timeout)
        if answered is not None:
            for name, future in (("spark", spark), ("kafka", kafka), ("influx", influx)):
                future.add_done_callback(lambda _, name=name: answered.add(name))  # type: ignore[misc]
        parts = {"spark": spark.result(), "kafka": kafka.result(), "influx": influx.result()}
    return {
        "ok": all(p["ok"] for p in parts.values()),
        "checked_at": time.time(),
        **parts,
        "daggers": {"running": daggers_running, "total": daggers_total},
    }


def _all_refuse(bootstrap: str) -> bool:
    """Return True when every ``host:port`` of ``bootstrap`` refuses a TCP connection (nothing listens)."""
    import socket

    for part in bootstrap.split(","):
        host, _, port = part.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
            return False
        except ConnectionRefusedError:
            continue
        except (OSError, ValueError):
            return False
    return True


def count_failures(probe: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Return ``probe`` with each part's ``failures``: its unanswered probes in a row whose timeouts were
    real, counting those of the ``previous`` probe (0 when it answered); a starved probe (``starved``: its
    timeout was not real) adds none."""
    out = dict(probe)
    for name in ("spark", "kafka", "influx"):
        part = out.get(name)
        if isinstance(part, dict):
            before = int(((previous or {}).get(name) or {}).get("failures") or 0)
            failures = 0 if part.get("ok") else before + (0 if part.get("starved") else 1)
            out[name] = {**part, "failures": failures}
    return out


def summary(health: dict[str, Any] | None) -> str:
    """Return a one-line summary of a health dict, e.g. ``spark ok 2/2 workers 1/4 cores · kafka ok 12 partitions · influx ok``."""
    if not health:
        return "no health recorded"
    sp, kf, ix = health.get("spark") or {}, health.get("kafka") or {}, health.get("influx") or {}
    spark = (
        (
            f"spark {'ok' if sp.get('ok') else 'DOWN'} {sp.get('workers_alive', 0)}/{sp.get('workers', 0)} {'worker' if sp.get('workers', 0) == 1 else 'workers'} "
            f"{sp.get('cores_used', 0)}/{sp.get('cores', 0)} {'core' if sp.get('cores', 0) == 1 else 'cores'}"
        )
        if sp.get("mode") == "standalone"
        else (f"spark local {counted(sp.get('cores', 0), 'core')}")
    )
    kafka = f"kafka {'ok' if kf.get('ok') else 'DOWN'}" + (
        f" {counted(kf.get('partitions') or 0, 'partition')}" if kf.get("ok") else ""
    )
    influx = f"influx {'ok' if ix.get('ok') else 'DOWN'}"
    return " · ".join([spark, kafka, influx])
