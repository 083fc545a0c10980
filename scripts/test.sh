#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite against real services started by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check job tests bench
.venv/bin/lint-imports
# Four test processes on two cores: the slowest tests wait on outages and restarts (sleep 30 s, 60 s; a new
# JVM per kill) more than they compute. With three, the whole suite used 1.5 of the 2 cores on average
# (1,700 core-s in 957 s of tests): the processes were waiting, not the cores.
.venv/bin/python -m pytest -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder --durations=30 "$@"
