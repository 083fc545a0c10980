#!/usr/bin/env bash
# Make the virtualenv that Apache Flink (PyFlink 2.3) runs in, for the Flink compatibility harness
# (bench/flink_compat) and the Flink peer of bench/run.py.
#
# apache-flink 2.3 pins its own apache-beam, pandas, numpy, pyarrow, protobuf and cloudpickle, which
# clash with the project's (protobuf 7, pandas 3, pyspark 4.3), so it gets a virtualenv of its own
# instead of the project's .venv. The wheels carry Flink's runtime, the SQL planner, the filesystem
# connector and the JSON/CSV formats; no Kafka connector jar is reachable here, so Flink reads the same
# events from JSON-lines files that Daggers reads from the broker. Java 17 must be on PATH.
#
# The venv is $DAGGERS_FLINK_VENV (default bench/.flink-venv, gitignored); the harness and
# bench/run.py look there and skip the Flink side when it is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${DAGGERS_FLINK_VENV:-$here/.flink-venv}"
python="${PYTHON:-python3.11}"
if ! command -v java >/dev/null; then
  echo "setup_flink: java not found: install a JDK 17 (apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "apache-flink==2.3.0" "apache-flink-libraries==2.3.0" "s2sphere==0.2.5"
"$venv/bin/python" - <<PY
import pyflink, importlib.metadata as md
print("apache-flink", md.version("apache-flink"), "in", "$venv")
PY
