"""Counts in words: a count of one takes the singular ("1 cluster", "1 dagger")."""

from __future__ import annotations

import pytest

from job.common.words import counted, plural


@pytest.mark.parametrize(
    ("noun", "many"),
    [
        ("cluster", "clusters"),
        ("batch", "batches"),
        ("retry", "retries"),
        ("data centre", "data centres"),
        ("day", "days"),
        ("bus", "buses"),
    ],
)
def test_plural(noun: str, many: str) -> None:
    assert plural(noun) == many


def test_counted() -> None:
    assert counted(1, "cluster") == "1 cluster"
    assert counted(0, "cluster") == "0 clusters"
    assert counted(2, "data centre") == "2 data centres"
    assert counted(1, "batch") == "1 batch"
    assert counted(1200, "row", fmt=",") == "1,200 rows"
    assert counted(1.0, "minute", fmt="g") == "1 minute"
    assert counted(2.5, "minute", fmt="g") == "2.5 minutes"
    assert counted(3, "person", "people") == "3 people"
