#!/usr/bin/env bash
# Set up (if needed) and run the test suite against real services started by the tests.
#
#   bash scripts/test.sh           # every test but the fault group (the README's test command)
#   bash scripts/test.sh --faults  # the fault group only: the tests that kill or freeze a component
#   bash scripts/test.sh --all     # both in one run (CI: .ci/run)
#
# Other arguments go to pytest (a -m of your own replaces the group's).
set -euo pipefail
cd "$(dirname "$0")/.."
group=(-m "not fault")
case "${1:-}" in
  --all) group=(); shift ;;
  --faults) group=(-m fault); shift ;;
esac
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
# run with --junitxml=F, refresh it with .venv/bin/python scripts/test_durations.py F). The fault group
# (-m fault: the tests that kill or freeze a broker, a dagger, a JVM or a controller and check what survives, a
# quarter of the suite's test time, mostly waits on outages and restarts) runs with --faults or --all; CI: --all.
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider -n 4 --dist loadfile --no-loadscope-reorder --durations=30 \
  ${group[@]+"${group[@]}"} "$@" || status=$?
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
