"""The Python peers Daggers is compared with: a hand-written loop, a PySpark job with per-row UDFs, Quix Streams."""
