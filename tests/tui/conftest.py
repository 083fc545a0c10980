"""The console tests' shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from job.control import Registry, health
from tests.tui.tui_world import build


@pytest.fixture(autouse=True)
def _quick_topic_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The world's Kafka (127.0.0.1:9) refuses connections: a form's list of its topics gives up after 0.5 s
    there instead of the 5 s default, with the same error (a notification no check reads before it lands). A
    broker that is up keeps the default."""
    slow = health.list_topics

    def list_topics(bootstrap: str, timeout: float = 5.0) -> list[str]:
        return slow(bootstrap, 0.5 if bootstrap == "127.0.0.1:9" else timeout)

    monkeypatch.setattr(health, "list_topics", list_topics)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The registry file of :func:`tests.tui.tui_world.build`, filled once for the module (~3 s a time)."""
    path = tmp_path_factory.mktemp("world") / "registry.db"
    reg = Registry(f"sqlite:///{path}")
    build(reg)
    reg.close()
    return path
