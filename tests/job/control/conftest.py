"""Fixtures of the control-plane tests: ``registry`` (SQLite and the real PostgreSQL)."""

from tests.job.control.control_seed import registry

__all__ = ["registry"]
