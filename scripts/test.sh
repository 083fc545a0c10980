#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite against real services started by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check job tests bench scripts alerting tui web_atlas
.venv/bin/lint-imports
# Three test processes on two cores: the slowest tests wait on outages and restarts (sleep 30 s, 60 s; a new
# JVM per kill) more than they compute. Four were slower on a clean clone (1,008 s of tests against 957 s with
# three, 1,917 core-s against 1,700: more JVMs and workers at once), and a timing test failed under the load.
# The longest modules start first (tests/durations.json; after a run with --junitxml=F, refresh it with
# .venv/bin/python scripts/test_durations.py F).
.venv/bin/python -m pytest -q -p no:cacheprovider -n 3 --dist loadfile --no-loadscope-reorder --durations=30 "$@"
