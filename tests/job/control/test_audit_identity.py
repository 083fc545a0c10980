"""The audit log names who opened the registry directly (embedded mode) as it names a server's client."""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path

from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.models import AuditEntry
from tests.job.control.control_seed import seed


def test_an_embedded_change_names_the_os_user_and_the_host(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(registry)
        ControlPlane(registry, "root").add_user("mallory")
        with registry.session() as s:
            row = s.scalars(
                select(AuditEntry).where(
                    AuditEntry.action == "add user", AuditEntry.target.contains("mallory")
                )
            ).one()
            assert (row.credential, row.source) == (
                f"embedded:{getpass.getuser()}",
                f"local {socket.gethostname()} pid {os.getpid()}",
            )
        served = ControlPlane(registry, "root", credential="token:abc", source="10.0.0.9")
        assert (served.credential, served.source) == ("token:abc", "10.0.0.9")
    finally:
        registry.close()
