"""Nexmark (github.com/nexmark/nexmark) on Daggers and Flink: the events, the queries, the oracle and the bench."""
