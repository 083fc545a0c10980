#!/bin/sh
# Spark's Python where a fork server runs (job/shared/forkserver.py): the streaming source runner (one per
# query), PySpark's daemons of the data sources' planning workers and the UDF workers' daemon fork from it
# when there is one; everything else is the interpreter.
python="${DAGGERS_PYTHON:-python3}"
# `python -m` puts the working folder first on the import path: a pyspark.py there would run (Python 3.11+)
export PYTHONSAFEPATH=1
served=false
case "$2" in
  pyspark.sql.streaming.python_streaming_source_runner|pyspark.daemon|job.spark.worker_daemon) served=true ;;
esac
if [ -n "$DAGGERS_FORK_SERVER" ] && [ "$1" = "-m" ] && [ "$served" = true ]; then
  if [ -n "$DAGGERS_FORK_CLIENT" ]; then
    exec "$DAGGERS_FORK_CLIENT" "$@"
  fi
  exec "$python" -S "$(dirname "$0")/forkclient.py" "$@"
fi
exec "$python" "$@"
