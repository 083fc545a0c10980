"""A dagger's last error is named on every surface by its title, whatever the controller's process imported:
the controller never imports the Kafka source, yet a data loss the source raised on a real broker must reach
``dagger show``, ``status``, the console and /metrics as "Data loss", with its message and hint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.read import read_range
from tests.helpers import unique
from tests.job.sources.test_stall import _bookings, _cfg

pytestmark = pytest.mark.integration

_READ_IN_A_CONTROLLER = """
import json, sys
import job.control.controller, job.cli
from job.control.processes import last_error
assert "job.sources.data_loss" not in sys.modules
print(json.dumps(last_error(sys.stdin.read())))
"""


def test_a_data_loss_is_named_by_a_process_that_never_imported_the_source(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("lost")
    _bookings(broker, topic, 100)
    try:
        with pytest.raises(DataLossError) as caught:
            list(read_range(_cfg(broker.bootstrap, topic, timeout=3_600.0), OffsetRange(topic, 0, 150, 200)))
    finally:
        kread.reset_consumers()
    log = "=== start\n26/12/06 WARN Noise: blah\n" + caught.value.state_text() + "\n"
    out = subprocess.run(
        [sys.executable, "-c", _READ_IN_A_CONTROLLER], input=log, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == (
        f"Data loss: {topic}[0]: the checkpoint's position 150 is past the partition's end 100 by 50 records: "
        f"the broker lost records or the topic was recreated\nhint: {caught.value.hint}"
    )
