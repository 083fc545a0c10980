"""The rule that fails a benchmark run: a runner that processed nothing or got another result than expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.peers.spark_udf_peer import NEEDED, plain_source
from bench.verdict import failures
from job.plan import plan
from tests.helpers import DRIVERS_SQL, make_spec

EQUAL = {"events": 1_001_000, "complete": True, "check": "equal (201,059 points)"}


def _results(**runs: dict) -> dict:
    return {"workloads": {"a": {"runs": {"engine": EQUAL, **runs}}}}


def test_a_sound_run_has_no_failures() -> None:
    assert failures(_results(loop=EQUAL, quix={"events": 0, "check": "not run", "note": "no venv"},
                             sparkudf={"events": 40_000, "complete": False,
                                       "check": "stopped after 600 s at 40,000 of 1,001,000 events; equal (9 points) "
                                                "over 3 closed window(s)"})) == []


@pytest.mark.parametrize(("runs", "failure"), [
    ({"sparkudf": {"events": 0, "check": "no events processed", "note": "AnalysisException: lat"}},
     "workload (a), sparkudf: processed no events (no events processed) AnalysisException: lat"),
    ({"loop": {"events": 1_001_000, "complete": True,
               "check": "DIFFERENT: 0 missing, 0 extra, 3 wrong of 10 (e.g. (60, 'x'): expected (2,), got (1,))"}},
     "workload (a), loop: a result other than the expected one: DIFFERENT: 0 missing, 0 extra, 3 wrong of 10 "
     "(e.g. (60, 'x'): expected (2,), got (1,))"),
    ({"engine": {"events": 0, "complete": False, "check": "not finished", "note": "the job exited with 2"}},
     "workload (a), engine: processed no events (not finished) the job exited with 2"),
    ({"engine": {"events": 5, "complete": False, "check": "not finished"}},
     "workload (a), engine: did not finish (not finished)"),
])
def test_nothing_processed_or_a_wrong_result_fails_the_run(runs: dict, failure: str) -> None:
    assert failures(_results(**runs)) == [failure]


def test_the_per_row_udf_peer_gets_the_columns_the_engine_hides(tmp_path: Path) -> None:
    spec, _ = make_spec(name="peer", bootstrap="127.0.0.1:9", topic="t", proto_class="daggers.events.DriverLocationPing",
                        sql=DRIVERS_SQL, influx_url="http://127.0.0.1:9", db="d", measurement="m",
                        checkpoint=tmp_path / "c")
    engine_source = plan(spec, tmp_path).streams[0].source
    assert {"lat", "long"} <= set(engine_source.hidden or [])  # the source computes the S2 cell itself
    assert set(NEEDED) <= set(plain_source(engine_source).output_columns())
