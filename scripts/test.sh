#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite against real services started by the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The tests' processes cache the bytecode they compile (pytest its rewritten test modules: collection 9.3 → 4.9 s
# in each test process), whatever the shell says.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff format --check job tests bench scripts alerting tui web_atlas
.venv/bin/ruff check job tests bench scripts alerting tui web_atlas
# The import contracts and the types are checked while the tests run: mypy is one process on one core for a
# minute or more, and the tests leave a core idle now and then (waits on outages and restarts). Their output
# comes after the tests'; any of the three failing fails the script.
checks=$(mktemp -d)
.venv/bin/lint-imports >"$checks/contracts.log" 2>&1 & contracts=$!
.venv/bin/mypy >"$checks/types.log" 2>&1 & types=$!
# Four test processes on two cores: the slowest tests wait on outages and restarts (a 12-s broker outage, a
# 20-s receiver outage, a new JVM per kill) more than they compute. On a clean clone, 1 Dec 2026: -n 3 took
# 894 s of pytest with the machine 1.60 cores busy on average, -n 4 843 s at 1.88 cores (scripts/test_cpu.py,
# tests/cpu_usage.py measure where the CPU goes). The longest modules start first (tests/durations.json; after a
# run with --junitxml=F, refresh it with .venv/bin/python scripts/test_durations.py F). No marker is left out:
# the fault group (-m fault, the tests that kill or freeze a component) runs here with the rest.
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder --durations=30 "$@" ||
  status=$?
for check in contracts types; do
  pid=${!check}
  if wait "$pid"; then
    printf '%s: ok\n' "$check"
  else
    printf '%s: FAILED\n' "$check"
    status=1
  fi
  cat "$checks/$check.log"
done
rm -rf "$checks"
exit "$status"
