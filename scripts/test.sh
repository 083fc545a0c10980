#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite against real services started by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check job tests bench
.venv/bin/lint-imports
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=30 "$@"
