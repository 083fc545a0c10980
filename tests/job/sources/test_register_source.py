"""Registering the Kafka data source (job.sources.kafka.register_source) in sessions of one application."""

from __future__ import annotations

import pytest

from job.sources.kafka import SOURCE_NAME, register_source


def known(session) -> bool:  # type: ignore[no-untyped-def]
    return bool(session._jsparkSession.sessionState().dataSourceManager().dataSourceExists(SOURCE_NAME))


@pytest.mark.integration
def test_a_child_session_registers_the_source_its_parent_has(spark) -> None:  # type: ignore[no-untyped-def]
    """Spark 4.3 does not hand a parent's Python data sources to a newSession() child, and refused the
    child's registration while the parent was the active session: the child could not read at all."""
    register_source(spark)
    register_source(spark)  # again: idempotent
    child = spark.newSession()
    assert not known(child)
    register_source(child)
    assert known(child) and known(spark)
    # the child reads with it: the source answers (here: that its options are missing), not Spark's lookup
    with pytest.raises(Exception, match="needs the option 'bootstrap_servers'"):
        child.read.format(SOURCE_NAME).load()
