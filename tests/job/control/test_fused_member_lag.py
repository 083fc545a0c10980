"""A fused member has no query of its own: its lag (and a broker that does not answer it) is its group's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from job.control.lag import dagger_lag
from job.errors import SourceError
from job.query.offset_log import committed_offsets, offsets_checkpoint, point_offsets
from tests.helpers import committed_checkpoint


def test_a_member_reads_its_groups_offsets(tmp_path: Path) -> None:
    group = committed_checkpoint(tmp_path / "group" / "gen-2", {"bookings": {"0": 700, "1": 300}})
    member = tmp_path / "member" / "checkpoint-1"
    member.mkdir(parents=True)
    assert committed_offsets(member) is None  # before: "idle", never a lag read
    point_offsets(member, group)
    assert offsets_checkpoint(member) == group
    assert committed_offsets(member) == {"bookings": {"0": 700, "1": 300}}


def test_a_query_of_its_own_after_the_pointer_wins(tmp_path: Path) -> None:
    group = committed_checkpoint(tmp_path / "group" / "gen-1", {"bookings": {"0": 700}})
    member = tmp_path / "member"
    member.mkdir()
    point_offsets(member, group)
    past = time.time() - 60
    os.utime(member / "offsets-from", (past, past))
    committed_checkpoint(
        member, {"bookings": {"0": 900}}
    )  # it left the group and committed a batch of its own
    assert committed_offsets(member) == {"bookings": {"0": 900}}
    point_offsets(member, group)  # fused again
    assert committed_offsets(member) == {"bookings": {"0": 700}}


def test_a_member_whose_brokers_do_not_answer_has_a_lag_error_not_idle(tmp_path: Path) -> None:
    """Nothing listens on port 9: reading the member's lag raises (the health model's "brokers do not answer"),
    where before it returned None (no committed batch of its own: "idle: nothing new to read")."""
    group = committed_checkpoint(tmp_path / "gen-1", {"bookings": {"0": 700}})
    member = tmp_path / "member"
    member.mkdir()
    streams = [("127.0.0.1:9", ["bookings"], {"socket.timeout.ms": "2000"})]
    assert dagger_lag(member, streams) is None
    point_offsets(member, group)
    with pytest.raises(SourceError):
        dagger_lag(member, streams)
