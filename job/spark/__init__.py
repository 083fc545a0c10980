"""The Spark runtime a dagger runs on: the session and its settings, the JVM's class archive and
Java aggregates, the Python workers, and each process's scratch folder."""
