"""Write ``tests/durations.json``, each test module's seconds in a run, from that run's JUnit XML.

    .venv/bin/python -m pytest ... --junitxml=run.xml   (scripts/test.sh passes PYTEST_ADDOPTS through)
    .venv/bin/python scripts/test_durations.py run.xml

``tests/conftest.py`` starts the longest modules first (``-n 4 --dist loadfile``): the workers then end
within seconds of each other. Modules of 2 s or less are left out (they fill the gaps at the end).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "durations.json"


def module_path(classname: str) -> str:
    """Return the test module's path of a JUnit ``classname``: ``tests.job.test_x`` (a function) or
    ``tests.job.test_x.TestY`` (a method of a class) both give ``tests/job/test_x.py``."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).is_file():
            return path
    return "/".join(parts) + ".py"


def module_seconds(junit: Path) -> dict[str, float]:
    """Return each test module's path (``tests/...py``) and the seconds its tests took, setup included."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(junit).iter("testcase"):
        seconds[module_path(case.get("classname", ""))] += float(case.get("time") or 0)
    return {path: round(s, 1) for path, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s > 2}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    durations = module_seconds(Path(argv[0]))
    OUT.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{OUT}: {len(durations)} modules, {sum(durations.values()):,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
