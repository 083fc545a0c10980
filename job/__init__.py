"""Daggers: self-serve real-time aggregation over Kafka protobuf streams.

The ``job`` package is the engine and the control plane. It never imports a UI toolkit.
"""

__version__ = "0.1.0"
