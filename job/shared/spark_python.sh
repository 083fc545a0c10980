#!/bin/sh
# Spark's Python in a shared host (job/shared/forkserver.py): the streaming source runner, which Spark
# keeps per query, and PySpark's daemon of the data sources' planning workers are forked from the fork
# server when there is one; everything else is the interpreter.
python="${DAGGERS_PYTHON:-python3}"
if [ -n "$DAGGERS_FORK_SERVER" ] && [ "$1" = "-m" ] && { [ "$2" = "pyspark.sql.streaming.python_streaming_source_runner" ] || [ "$2" = "pyspark.daemon" ]; }; then
  if [ -n "$DAGGERS_FORK_CLIENT" ]; then
    exec "$DAGGERS_FORK_CLIENT" "$@"
  fi
  exec "$python" -S "$(dirname "$0")/forkclient.py" "$@"
fi
exec "$python" "$@"
