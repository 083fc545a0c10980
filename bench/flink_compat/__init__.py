"""The Flink compatibility harness: the same Dagger SQL on Apache Flink (from files) and on Daggers (from a
broker), rows compared exactly; Flink's rows are kept as golden files. See docs/flink-compat.md."""
