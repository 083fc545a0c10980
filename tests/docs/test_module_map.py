"""The module map in docs/architecture.md names every room of ``job/``, and nothing that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rooms_on_disk() -> set[str]:
    job = ROOT / "job"
    rooms = {f"job/{p.name}/" for p in job.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {f"job/{p.name}" for p in job.glob("*.py") if p.name != "__init__.py"}
    return rooms | modules


def _rooms_in_map() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("### The engine's rooms", 1)[1].split("\n\n`job/`", 1)[0]
    return set(re.findall(r"^\| `(job/[\w.]+/?)` \|", section, flags=re.M))


def test_the_map_names_every_room_of_job() -> None:
    on_disk, in_map = _rooms_on_disk(), _rooms_in_map()
    assert on_disk - in_map == set(), "rooms missing from docs/architecture.md's map"
    assert in_map - on_disk == set(), "the map names rooms that are gone"
