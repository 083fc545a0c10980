"""Sinks: where a dagger's result rows go. See :mod:`job.sinks.base` for the contract."""

from job.sinks.base import Sink, SinkMetrics
from job.sinks.registry import build_sinks

__all__ = ["Sink", "SinkMetrics", "build_sinks"]
