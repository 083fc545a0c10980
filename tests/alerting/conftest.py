"""Fixtures of the alerting tests.

``bookings_output``: a REAL dagger (Spark, the tansu broker, InfluxDB) that counted bookings per city
and minute over data shaped for alerting (see tests/alerting/alert_data.py); it runs once per test
session. ``http_receiver`` and ``smtp_receiver`` are local receivers, down until ``.up()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.alerting.alert_data import DaggerOutput, run_bookings_dagger
from tests.alerting.alert_receivers import HttpReceiver, SmtpReceiver


@pytest.fixture(scope="session")
def bookings_output(spark, tansu_broker, influxdb, tmp_path_factory) -> DaggerOutput:  # type: ignore[no-untyped-def]
    """The bookings-per-city dagger's output (run once per session)."""
    return run_bookings_dagger(spark, tansu_broker, influxdb, tmp_path_factory.mktemp("alert-dagger"))


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    """An HTTP receiver on an OS port, not listening until ``.up()``."""
    receiver = HttpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def smtp_receiver() -> Iterator[SmtpReceiver]:
    """An SMTP receiver on an OS port, not listening until ``.up()``."""
    receiver = SmtpReceiver()
    yield receiver
    receiver.close()
