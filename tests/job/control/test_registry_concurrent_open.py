"""Two processes opening a new registry at once: the one that loses the race to create a table goes on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect

from job.control import Registry
from job.control.models import Base


def test_a_table_made_by_another_opener_between_check_and_create_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    real_create_all = Base.metadata.create_all
    calls: list[int] = []

    def lose_the_race(bind: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            # The other opener creates every table, then our CREATE runs without checking: SQLite's real error.
            real_create_all(create_engine(url))
            real_create_all(bind, checkfirst=False)
        else:
            real_create_all(bind, **kwargs)

    monkeypatch.setattr(Base.metadata, "create_all", lose_the_race)
    registry = Registry(url)
    assert len(calls) == 2
    assert set(inspect(registry.engine).get_table_names()) == set(Base.metadata.tables)


def test_eight_processes_opening_one_new_registry_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    code = f"from job.control import Registry; Registry({url!r}); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, out.strip()) for p, (out, _err) in zip(procs, outs, strict=True)] == [
        (0, "ok")
    ] * 8, outs


def test_a_real_error_still_names_the_registry(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(Exception, match="cannot open the registry at sqlite:///"):
        Registry(f"sqlite:///{tmp_path / 'dir.db'}")
