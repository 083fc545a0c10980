"""The console through a real server (PostgreSQL registry, real HTTP, a real broker; the preview's Spark runs
in the server): the form's preview shows the query's rows exactly, Ctrl+S creates and deploys as the token's
user, then the detail screen stops and deploys again; the registry and the audit say who did it, with which
credential, from where."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from textual.widgets import DataTable

from job.control import Registry
from job.control.models import AuditEntry
from job.control.remote import RemoteControlPlane
from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.broker import create_topic
from tests.helpers import unique
from tests.job.control.control_seed import postgres_url, seed
from tests.job.server.server_world import running_server
from tests.tui.tui_world import new_dagger_preview, settle
from tui.app import DaggersApp
from tui.detail import DaggerScreen

pytestmark = pytest.mark.integration


def _end_s(value: datetime) -> int:
    return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())


@pytest.mark.asyncio
async def test_console_through_the_server_create_preview_deploy_stop(
    tansu_broker: str, postgres: Any, tmp_path: Path
) -> None:
    topic = unique("srv-bookings")
    create_topic(tansu_broker, topic, 2)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=90)
    batch = generate("booking", 400, seed=11, start=start, duration_s=20)
    produce(tansu_broker, topic, batch, progress=False)
    want = Counter(
        (r["city_id"], (int(r["event_timestamp"].timestamp()) // 60) * 60 + 60)
        for r in batch.table.to_pylist()
    )

    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root = seed(registry, kafka=tansu_broker, influx="http://127.0.0.1:9")
    view, token = root.create_token("alice")
    with running_server(url, tmp_path / "server.log") as base:
        app = DaggersApp(RemoteControlPlane(base, token), refresh_s=0)
        async with app.run_test(size=(120, 40)) as pilot:
            form = await new_dagger_preview(app, pilot, "a-jkt", "via-server", topic)
            await settle(app)
            await pilot.pause()
            table = form.query_one("#preview-rows", DataTable)
            shown = {
                (int(str(r[0])), _end_s(datetime.fromisoformat(str(r[2])))): int(str(r[1]))
                for r in (table.get_row_at(i) for i in range(table.row_count))
            }
            assert shown == dict(want)
            assert root.daggers() == []  # a preview creates nothing

            await pilot.press("ctrl+s")
            await settle(app)
            await pilot.pause()
            assert isinstance(app.screen, DaggerScreen)
            created = root.dagger("team-a/via-server")
            assert (created.desired_state, created.created_by) == ("running", "alice")
            await pilot.press("s")
            await settle(app)
            await pilot.pause()
            assert root.dagger("team-a/via-server").desired_state == "stopped"
            await pilot.press("d")
            await settle(app)
            await pilot.pause()
            assert root.dagger("team-a/via-server").desired_state == "running"
    with registry.session() as s:
        rows = s.scalars(
            select(AuditEntry).where(AuditEntry.target == "dagger team-a/via-server").order_by(AuditEntry.id)
        ).all()
        assert [(a.user, a.action, a.credential, a.source) for a in rows] == [
            ("alice", action, f"token:{view.token_id}", "127.0.0.1")
            for action in ("create", "deploy", "stop", "deploy")
        ]
    registry.close()
