"""The alert store and the scheduler's job store on a REAL PostgreSQL (the shared set-up): state survives
a new engine, the jobs live in PostgreSQL, and the lease keeps a second engine off the store."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from alerting.config import parse_config
from alerting.engine import JOB_TABLE, AlertEngine
from alerting.errors import EngineBusyError, StoreError
from alerting.state import Level
from alerting.store import AlertStore
from tests.alerting.alert_setup import FakeReader, Recorder
from tests.helpers import unique

pytestmark = pytest.mark.integration
T = 1772445600.0


def test_shared_store_on_postgres(postgres, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = unique("alerts").replace("-", "_")
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = postgres.dsn.replace("postgresql://", "postgresql+psycopg://").rsplit("/", 1)[0] + f"/{db}"
    config = parse_config(
        """store:
  url: ${ALERTS_STORE}
channels:
  rec: {type: webhook, url: "http://127.0.0.1:9/x"}
default_channels: [rec]
rules:
  - {name: spike, team: t, measurement: m, field: n, aggregate: sum, window: 1m, every: 1h, crit: {above: 10}}
""",
        env={"ALERTS_STORE": url},
    )

    def engine() -> tuple[AlertEngine, FakeReader, Recorder]:
        reader, rec = FakeReader(), Recorder("rec")
        return AlertEngine(config, state_dir=tmp_path, reader=reader, notifiers={"rec": rec}), reader, rec  # type: ignore[arg-type]

    first, reader, rec = engine()
    second, _, rec2 = engine()
    try:
        assert first.store.safe_url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
        reader.data[T] = {"A": 50}
        first.evaluate_rule("spike", T)
        assert [n.level for n in rec.got] == ["CRIT"]
        first.start()
        with pytest.raises(EngineBusyError, match="another alert engine"):
            second.start()
        first.stop()
        second.start()
        assert [(s.rule, s.level, s.notified_level) for s in second.firing()] == [
            ("spike", Level.CRIT, Level.CRIT)
        ]
        with sa.create_engine(url).connect() as conn:
            jobs = sorted(conn.execute(sa.text(f"SELECT id FROM {JOB_TABLE}")).scalars())
        assert jobs == ["dispatch", "housekeeping", "rule:spike"]
        second.stop()
    finally:
        first.close()
        second.close()
    assert rec2.got == []  # the second engine had nothing new to send
    with pytest.raises(
        StoreError, match="cannot open the alert store postgresql\\+psycopg://nobody:\\*\\*\\*@"
    ) as exc:
        AlertStore(f"postgresql+psycopg://nobody:hunter2@127.0.0.1:{postgres.port}/nowhere")
    assert "hunter2" not in str(exc.value)
