"""Sum what tests/cpu_usage.py recorded, by test module: core-seconds and wall seconds, most CPU first.

DAGGERS_TEST_CPU=/tmp/cpu bash scripts/test.sh
.venv/bin/python scripts/test_cpu.py /tmp/cpu [--tests N]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def load(prefix: str) -> list[dict[str, object]]:
    """Return every line recorded under ``prefix`` (all workers)."""
    base = Path(prefix)
    rows = []
    for path in sorted(base.parent.glob(base.name + ".*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    rows = load(argv[0])
    if not rows:
        print(f"nothing recorded under {argv[0]}")
        return 1
    n_tests = int(argv[argv.index("--tests") + 1]) if "--tests" in argv else 20
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        m = modules[str(r["test"]).split("::")[0]]
        m[0] += float(r["cpu_s"])  # type: ignore[arg-type]
        m[1] += float(r["wall_s"])  # type: ignore[arg-type]
        m[2] += 1
    cpu = sum(m[0] for m in modules.values())
    wall = sum(m[1] for m in modules.values())
    print(f"{len(rows)} tests: {cpu:,.0f} core-s, {wall:,.0f} test-s")
    print(f"{'core-s':>8} {'test-s':>8} {'tests':>5}  module")
    for name, (c, w, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"{c:8.0f} {w:8.0f} {n:5d}  {name}")
    print(f"\n{'core-s':>8} {'test-s':>8}  test")
    for r in sorted(rows, key=lambda r: -float(r["cpu_s"]))[:n_tests]:  # type: ignore[arg-type]
        print(f"{float(r['cpu_s']):8.1f} {float(r['wall_s']):8.1f}  {r['test']}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
