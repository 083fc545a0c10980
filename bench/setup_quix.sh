#!/usr/bin/env bash
# Make the virtualenv the Quix Streams peer of bench/run.py runs in.
#
# quixstreams 3.28 pins confluent-kafka < 2.13 (the project uses 2.16) and its own pydantic, so it
# gets a virtualenv of its own instead of the project's .venv. bench/run.py looks for it at
# $DAGGERS_BENCH_QUIX_VENV (default ~/.cache/daggers-bench/quix-venv) and skips the Quix peer when
# it is missing.
set -euo pipefail
venv="${DAGGERS_BENCH_QUIX_VENV:-$HOME/.cache/daggers-bench/quix-venv}"
python="${PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet "quixstreams==3.28.1" "s2sphere==0.2.5" requests
"$venv/bin/python" -c "import quixstreams, s2sphere; print('quixstreams', quixstreams.__version__, 'in', '$venv')"
