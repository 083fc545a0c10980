"""The Flink side of the harness, from the project's virtualenv: the events as JSON-lines files, the
Flink runner as a subprocess of the Flink virtualenv (``bench/setup_flink.sh``), and the golden files.

Flink reads the events from local files (no Kafka connector jar is reachable here); Daggers reads the
same events from a broker.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from bench.flink_compat.cases import CASES, DATASETS, WATERMARK_DELAY_S, Case, to_json_event

ROOT = Path(__file__).resolve().parents[2]
#: Where bench/setup_flink.sh puts the Flink virtualenv (``DAGGERS_FLINK_VENV`` overrides it).
DEFAULT_VENV = ROOT / "bench" / ".flink-venv"
GOLDEN = Path(__file__).resolve().parent / "golden"


class FlinkError(RuntimeError):
    """The Flink runner failed as a whole (not one query)."""


def flink_python() -> Path | None:
    """Return the Flink virtualenv's python, or None when bench/setup_flink.sh has not made it (or no java)."""
    venv = Path(os.environ.get("DAGGERS_FLINK_VENV", DEFAULT_VENV))
    python = venv / "bin" / "python"
    found = list((venv / "lib").glob("python3*/site-packages/pyflink/lib/flink-dist-*.jar"))
    return python if python.exists() and found else None


def write_datasets(folder: Path) -> dict[str, dict[str, str]]:
    """Write every data set's tables as JSON-lines files under ``folder``; return {data set: {table: path}}."""
    out: dict[str, dict[str, str]] = {}
    for name, tables in DATASETS.items():
        out[name] = {}
        for table, events in tables.items():
            path = folder / f"{name}-{table}.jsonl"
            path.write_text("".join(json.dumps(to_json_event(e)) + "\n" for e in events))
            out[name][table] = str(path)
    return out


def run_flink(cases: list[Case], folder: Path, timeout_s: float = 900.0) -> dict[str, dict[str, Any]]:
    """Run ``cases`` on Flink; return {case id: {"columns", "rows"} or {"error"}}.

    Raises FlinkError when the Flink virtualenv is missing, or the runner fails or times out."""
    python = flink_python()
    if python is None:
        raise FlinkError("no Flink virtualenv: run bench/setup_flink.sh")
    folder.mkdir(parents=True, exist_ok=True)
    job = {
        "watermark_delay_s": WATERMARK_DELAY_S,
        "datasets": write_datasets(folder),
        "cases": [{"id": c.id, "dataset": c.dataset, "sql": c.flink_text} for c in cases],
    }
    (folder / "job.json").write_text(json.dumps(job))
    out = folder / "flink-rows.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [str(python), "-m", "bench.flink_compat.flink_runner", str(folder / "job.json"), str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise FlinkError(f"the Flink runner took over {timeout_s:.0f} s") from exc
    if done.returncode != 0 or not out.exists():
        raise FlinkError(f"the Flink runner failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, dict[str, Any]] = json.loads(out.read_text())
    return result


def golden_path(case_id: str) -> Path:
    """Return the golden file of ``case_id``."""
    return GOLDEN / f"{case_id}.json"


def write_golden(case: Case, result: dict[str, Any]) -> Path:
    """Keep Flink's rows of ``case`` as its golden file (or, for a case whose dagger stops with an error, Flink's
    error when Flink stops too); return its path. Raises FlinkError when Flink refused the query."""
    if "error" in result and not case.daggers_error:
        raise FlinkError(f"{case.id}: Flink refused the query: {result['error']}")
    path = golden_path(case.id)
    body = {
        "case": case.id,
        "what": case.what,
        "flink_sql": case.flink_text,
        "dagger_sql": case.sql,
        "differs": case.differs,
        "engine": "Apache Flink 2.3.0 (PyFlink, filesystem JSON source)",
        "columns": result.get("columns"),
        "types": result.get("types"),
        "rows": result.get("rows", []),
    }
    if "error" in result:
        body["error"] = result["error"]
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def read_golden(case_id: str) -> dict[str, Any]:
    """Return the golden file of ``case_id`` (columns, rows, the SQL Flink ran). Raises OSError if missing."""
    body: dict[str, Any] = json.loads(golden_path(case_id).read_text())
    return body


def all_case_ids() -> list[str]:
    """Return the ids of every case, in order."""
    return [c.id for c in CASES]
