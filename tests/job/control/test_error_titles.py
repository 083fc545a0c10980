"""A dagger's last error is named on every surface by its title, whatever the controller's process imported:
the controller never imports the Kafka source, yet a data loss the source raised on a real broker must reach
``dagger show``, ``status``, the console and /metrics as "Data loss", with its message and hint. The title
travels in the run's failure record (:mod:`job.query.failure_record`), which the dagger writes and the
controller reads as it is: no list of titles to know."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from job.query.failure_record import FAILURE_FILE, failure_of, write_failure
from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.read import read_range
from tests.helpers import unique
from tests.job.sources.test_stall import _bookings, _cfg

pytestmark = pytest.mark.integration

_READ_IN_A_CONTROLLER = """
import json, sys
from pathlib import Path
import job.control.controller, job.cli
from job.control.processes import exit_error
from job.query.failure_record import read_failure
assert "job.sources.data_loss" not in sys.modules
record = read_failure(Path(sys.argv[1]), since=float(sys.argv[2]))
print(json.dumps(exit_error(record, "=== start\\n26/12/06 WARN Noise: blah\\n", 2)))
"""


def test_a_data_loss_is_named_by_a_process_that_never_imported_the_source(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("lost")
    _bookings(broker, topic, 100)
    try:
        with pytest.raises(DataLossError) as caught:
            list(read_range(_cfg(broker.bootstrap, topic, timeout=3_600.0), OffsetRange(topic, 0, 150, 200)))
    finally:
        kread.reset_consumers()
    record = failure_of(caught.value)
    path = write_failure(tmp_path, record)
    assert (path.name, record.title, record.exit_code) == (FAILURE_FILE, "Data loss", 2)
    out = subprocess.run(
        [sys.executable, "-c", _READ_IN_A_CONTROLLER, str(tmp_path), str(record.at)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == (
        f"Data loss: {topic}[0]: the checkpoint's position 150 is past the partition's end 100 by 50 records: "
        f"the broker lost records or the topic was recreated\nhint: {caught.value.hint}"
    )
