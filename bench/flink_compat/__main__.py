"""``python -m bench.flink_compat [CASE ...]``: run the cases on Flink and rewrite their golden files.

Needs the Flink virtualenv (bench/setup_flink.sh). Prints each case's rows; exits 1 when Flink refused
a query (its golden file is left as it was)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.flink_compat.cases import CASES, case
from bench.flink_compat.flink_side import FlinkError, run_flink, write_golden


def main(argv: list[str]) -> int:
    try:
        chosen = [case(i) for i in argv] if argv else CASES
    except KeyError as exc:
        print(f"flink_compat: no case {exc}; the cases: {', '.join(c.id for c in CASES)}", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="flink-compat-") as tmp:
            results = run_flink(chosen, Path(tmp))
    except FlinkError as exc:
        print(f"flink_compat: {exc}", file=sys.stderr)
        return 2
    failed = 0
    for c in chosen:
        try:
            path = write_golden(c, results[c.id])
        except FlinkError as exc:
            print(exc)
            failed += 1
            continue
        if "error" in results[c.id]:
            print(f"{c.id}: Flink stopped, as the dagger does -> {path.name}: {results[c.id]['error'][:200]}")
            continue
        print(f"{c.id}: {len(results[c.id]['rows'])} rows -> {path.name}")
        for r in results[c.id]["rows"]:
            print("   ", r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
