#!/usr/bin/env bash
# Before a commit: the format, the lint, the import contracts, the types and the fast tests (about 1,200
# tests; the whole script costs some 130 core-seconds). Every step runs; the script fails at the end if any
# did, naming them. CI runs the same checks and the whole suite (scripts/test.sh).
#
#   bash scripts/check.sh          # everything
#   bash scripts/check.sh -x -k s2 # arguments go to pytest
#
# The fast tests are those that start no service: not marked integration (tests/conftest.py marks every
# test that uses a broker, InfluxDB, PostgreSQL, Elasticsearch, VictoriaMetrics or Spark fixture), slow or
# fault (the tests that kill or freeze a component), under tests/job, tests/alerting and tests/web_atlas.
# The console's and the docs' tests, and the fault group, run in CI (scripts/test.sh).
#
set -uo pipefail
cd "$(dirname "$0")/.."

PATHS=(job tests bench scripts alerting tui web_atlas)
failed=()

step() {
  local name=$1
  shift
  printf '\n== %s\n' "$name"
  local started=$SECONDS
  if "$@"; then
    printf -- '-- %s: ok (%d s)\n' "$name" $((SECONDS - started))
  else
    printf -- '-- %s: FAILED (%d s)\n' "$name" $((SECONDS - started))
    failed+=("$name")
  fi
}

step "format" .venv/bin/ruff format --check "${PATHS[@]}"
step "lint" .venv/bin/ruff check "${PATHS[@]}"
step "import contracts" .venv/bin/lint-imports
step "types" .venv/bin/mypy
step "fast tests" .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
  -m "not integration and not slow and not fault" tests/job tests/alerting tests/web_atlas "$@"

if ((${#failed[@]})); then
  printf '\ncheck: FAILED: %s\n' "$(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')"
  exit 1
fi
printf '\ncheck: all passed\n'
