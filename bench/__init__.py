"""Benchmarks of Daggers against the real local stack (never part of the test suite); see bench/run.py."""
