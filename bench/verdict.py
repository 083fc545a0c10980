"""Whether a benchmark run may be called a result: the rule that makes ``bench/run.py`` exit non-zero.

A benchmark that quietly prints "0 events/s" or a wrong aggregate and exits 0 measures nothing. A run
fails when any runner (the engine or a peer) that was run

* processed no events (``events`` is 0), or did not finish (the engine must), or
* gave a result other than the expected one (its ``check`` says ``DIFFERENT``).

A peer stopped at ``--peer-timeout`` is fine when every window it closed is equal; a peer that could not
run here (``check`` "not run": e.g. no Quix virtualenv) is reported, not failed.
"""

from __future__ import annotations

from typing import Any

NOT_RUN = "not run"


def failures(results: dict[str, Any]) -> list[str]:
    """Return one line per runner that makes the run fail (empty when the run is sound)."""
    out = []
    for key, entry in results.get("workloads", {}).items():
        for runner, run in (entry.get("runs") or {}).items():
            check = str(run.get("check") or "")
            if check == NOT_RUN:
                continue
            where = f"workload ({key}), {runner}"
            if not run.get("events"):
                out.append(f"{where}: processed no events ({check or 'no result'}) {run.get('note', '')}".strip())
            elif "DIFFERENT" in check:
                out.append(f"{where}: a result other than the expected one: {check}")
            elif runner == "engine" and not run.get("complete"):
                out.append(f"{where}: did not finish ({check})")
    return out
