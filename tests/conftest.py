"""Shared fixtures: real services come from tests/services.py (started on OS-assigned ports)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest_plugins = ["tests.services"]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the in-process dagger runs of the whole test session."""
    from job.spark_session import build_session

    session = build_session("daggers-tests", master="local[2]", shuffle_partitions=2,
                            extra={"spark.driver.memory": "2g"})
    yield session
    session.stop()
